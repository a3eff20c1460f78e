package transport

import (
	"encoding/json"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// discardConn is a socket that takes every write at once: what is measured is the transport's
// own work per delivery, not the kernel's.
type discardConn struct {
	net.Conn // nil: the writer uses only the methods below
	written  atomic.Int64
}

func (c *discardConn) Write(b []byte) (int, error) {
	c.written.Add(int64(len(b)))
	return len(b), nil
}
func (c *discardConn) SetWriteDeadline(time.Time) error { return nil }
func (c *discardConn) Close() error                     { return nil }

// benchSink returns a subscription's sink of one transport's connection on a discarding socket,
// and that connection's writer.
func benchSink(kind string, lim *Limits) (hub.Sink, *writer) {
	st := &connStats{sent: func(int) {}, lag: func(time.Duration) {}, overflow: func() {}}
	s := &Server{lim: *lim}
	switch kind {
	case "ws", "ws-data":
		c := &wsConn{conn: conn{s: s}}
		c.w = newWriter(&discardConn{}, c, lim, st)
		return &wsSink{c: c, dataOnly: kind == "ws-data"}, c.w
	case "sse", "sse-data":
		c := &sseConn{conn: conn{s: s}, dataOnly: kind == "sse-data", topics: []string{"bench/t"}, pos: make([]hub.Position, 1)}
		c.w = newWriter(&discardConn{}, c, lim, st)
		return &sseSink{c: c}, c.w
	case "stomp":
		c := &stompConn{conn: conn{s: s}, carrier: stompOverWS}
		c.w = newWriter(&discardConn{}, c, lim, st)
		return &stompSub{subHeld: subHeld{key: "0", topic: "bench/t"}, c: c, dest: "/topic/bench/t"}, c.w
	}
	panic(kind)
}

// drained reports whether w has written everything queued.
func drained(w *writer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.running && len(w.queue) == 0
}

// BenchmarkDeliver measures a publication's way from the hub's fan-out to the socket on each
// transport's connections (sink, queue, writer goroutine, encoding, one write per batch), at
// two fan-out sizes. An op is one publication delivered to every subscriber; the encoding a
// transport caches on the publication is computed once per op.
func BenchmarkDeliver(b *testing.B) {
	lim := Limits{}
	lim.fill()
	data := json.RawMessage(`{"userId":"u1234","x":12.34,"y":56.78}`)
	for _, kind := range []string{"ws", "ws-data", "sse", "sse-data", "stomp"} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/subs=%d", kind, n), func(b *testing.B) {
				sinks := make([]hub.Sink, n)
				writers := make([]*writer, n)
				for i := range sinks {
					sinks[i], writers[i] = benchSink(kind, &lim)
				}
				now := time.Now()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p := &hub.Publication{Topic: "bench/t", Offset: uint64(i + 1), Epoch: "e1", Time: now, Data: data}
					for _, k := range sinks {
						k.Deliver(p)
					}
					if i%64 == 63 { // bound the queues as a real fan-out's pace would
						for _, w := range writers {
							for !drained(w) {
								time.Sleep(time.Microsecond)
							}
						}
					}
				}
				for _, w := range writers {
					for !drained(w) {
						time.Sleep(time.Microsecond)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "deliveries/s")
			})
		}
	}
}

// BenchmarkEncode measures each transport's framer alone, with no goroutine: what one more
// subscriber costs (the publication's shared encoding already cached), and what the first one
// costs (a fresh publication each time).
func BenchmarkEncode(b *testing.B) {
	lim := Limits{}
	lim.fill()
	data := json.RawMessage(`{"userId":"u1234","x":12.34,"y":56.78}`)
	for _, kind := range []string{"ws", "ws-data", "sse", "sse-data", "stomp"} {
		for _, fresh := range []bool{false, true} {
			name := kind + "/cached"
			if fresh {
				name = kind + "/first"
			}
			b.Run(name, func(b *testing.B) {
				sink, w := benchSink(kind, &lim)
				p := &hub.Publication{Topic: "bench/t", Offset: 1, Epoch: "e1", Time: time.Now(), Data: data}
				buf := make([]byte, 0, 4096)
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if fresh {
						p = &hub.Publication{Topic: "bench/t", Offset: uint64(i + 1), Epoch: "e1", Time: p.Time, Data: data}
					}
					buf = w.f.appendItem(buf[:0], item{pub: p, sub: sink})
				}
			})
		}
	}
}
