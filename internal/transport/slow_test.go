package transport_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// Slow clients are cut off by their connection's writer (writer.go): when what is queued for
// them passes --queue-bytes, or a write takes longer than --write-timeout. The fan-out never
// waits for them.

// rawStream is a streaming connection read chunk by chunk (a message, an SSE line), for tests
// that control how fast a client reads.
type rawStream func(within time.Duration) (string, error)

// openSlow subscribes a connection of kind k with a tiny receive buffer to topic, and returns
// how to read it.
func openSlow(t *testing.T, s *tt.Server, k tt.Kind, topic string) rawStream {
	t.Helper()
	d := tt.Dialer{RcvBuf: 4096}
	switch k {
	case tt.WS:
		c := d.WS(t, s.WS("/api/ws"))
		c.Op("connected")
		c.Send(`{"op":"subscribe","topic":"` + topic + `"}`)
		c.Op("subscribed")
		return func(within time.Duration) (string, error) { b, err := c.Next(within); return string(b), err }
	case tt.STOMP:
		c := d.STOMP(t, s.WS("/api/stomp"))
		c.Connect("")
		c.Send("SUBSCRIBE\nid:1\ndestination:/topic/" + topic + "\nreceipt:r\n\n\x00")
		c.Expect("RECEIPT")
		return func(within time.Duration) (string, error) { b, err := c.Next(within); return string(b), err }
	case tt.SSE:
		c := d.SSE(t, s.URL+"/api/sse?topic="+topic, "")
		for {
			if line, err := c.Line(5 * time.Second); err != nil || line == ": connected" {
				break
			}
		}
		return c.Line
	}
	t.Fatalf("%s does not stream", k)
	return nil
}

// TestStalledClientCutOff: a client that stops reading is cut off, and the others on its topic
// receive everything meanwhile.
func TestStalledClientCutOff(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{
			History: hub.HistoryPolicy{Size: 10},
			// Room for a reader that is merely descheduled on a busy machine; the stalled
			// client still overflows it (about 3 MB is published).
			Limits: transport.Limits{QueueBytes: 512 << 10, WriteTimeout: 2 * time.Second},
		})
		openSlow(t, s, k, "t/fast") // from here on it reads nothing
		fast := s.Client(t, k, "t/fast", nil)
		payload := fmt.Sprintf(`{"blob":"%01000d"}`, 0)
		const n = 3000 // ~3 MB: far beyond the stalled client's socket buffers and its queue
		go func() {    // over HTTP, one after the other, as the clients of a real server publish
			hc := tt.Dialer{}.HTTP()
			for range n {
				if _, err := tt.PublishHTTP(context.Background(), hc, tt.Dialer{}, s.URL, "t/fast", payload); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
		}()
		for i, p := range tt.Messages(t, fast, n, 60*time.Second) {
			if p.Offset != uint64(i+1) {
				t.Fatalf("the other client: publication %d at offset %d", i, p.Offset)
			}
		}
		// A fully stalled socket cannot be told anything (its last write timed out mid-frame),
		// but the server counted why it cut it off.
		label := string(k)
		eventually.True(t, 10*time.Second, "the stalled client cut off", func() bool {
			return tt.Count(s.Metrics.QueueOverflows.WithLabelValues(label)) >= 1 ||
				tt.Count(s.Metrics.Disconnects.WithLabelValues(label, transport.ReasonWriteTimeout.Code)) >= 1
		})
	}, tt.Streaming...)
}

// TestSlowReaderToldWhy: a client that reads, but too slowly, overflows its queue and is told
// why before it is closed; or, if the flood met its subscription while it was catching up
// (paced by history reads, so never over its queue), it is told plainly of the publications
// history no longer holds (a gap). Either way nothing is lost silently. SSE is left out: its
// stream subscribes before it answers, so a flood often meets the start's catch-up, and a reader
// that reads is then paced by history and never cut off (TestStalledClientCutOff and
// TestSSECutOffIsHTTP cover its cut-off).
func TestSlowReaderToldWhy(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{QueueBytes: 32 << 10}})
		read := openSlow(t, s, k, "t/slow")
		// Wait for a first publication, so the flood meets a live subscription: one still
		// starting would take it as a backlog to catch up with, paced by history reads, which
		// tells a slow reader of gaps instead of cutting it off.
		s.Publish(t, "t/slow", `{"warm":1}`)
		for {
			chunk, err := read(10 * time.Second)
			if err != nil {
				t.Fatalf("the first publication: %v", err)
			}
			if strings.Contains(chunk, "warm") {
				break
			}
		}
		told := make(chan string, 1)
		go func() {
			for {
				chunk, err := read(20 * time.Second)
				if err != nil {
					told <- "closed without a reason: " + err.Error()
					return
				}
				if toldWhy(chunk) {
					told <- chunk
					return
				}
				time.Sleep(20 * time.Millisecond) // the reader is slow: that is what is tested
			}
		}()
		// 12 MB at most: more than the server's socket send buffer can hide.
		payload := fmt.Sprintf(`{"blob":"%08000d"}`, 0)
		for range 1500 {
			s.Publish(t, "t/slow", payload)
			select {
			case said := <-told:
				if !toldWhy(said) {
					t.Fatalf("slow reader: %s", said)
				}
				return
			default:
			}
		}
		select {
		case said := <-told:
			if !toldWhy(said) {
				t.Fatalf("slow reader: %s", said)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the slow reader was never cut off")
		}
	}, tt.WS, tt.STOMP)
}

// TestSSECutOffIsHTTP: an SSE stream cut off as a slow consumer before its head was written
// still answers HTTP: the status line and headers come first, then event: disconnect. (The
// goodbye used to replace the head, and the client read "disconnect" as its status line.)
func TestSSECutOffIsHTTP(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{QueueBytes: 4096}})
	big := `{"pad":"` + strings.Repeat("x", 8000) + `"}`
	if _, err := s.Hub.Publish(context.Background(), hub.PublishRequest{Topic: "cut", Data: []byte(big)}); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/sse?topic=cut&since=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") || !strings.Contains(string(got), "event: disconnect") {
		t.Fatalf("answer %q", firstBytes(got, 300))
	}
}

func firstBytes(b []byte, n int) []byte { return b[:min(len(b), n)] }

// TestSSEManyTopicsResume: an SSE stream resuming six topics at once, each with more backlog
// than a quarter of the queue (6 × 20 × 30 KB = 3.6 MB against 1 MiB), receives it all: the
// catch-ups share the queue instead of each queueing its first part at once.
func TestSSEManyTopicsResume(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{QueueBytes: 1 << 20}})
	data := []byte(`{"pad":"` + strings.Repeat("x", 30<<10) + `"}`)
	var q, tok []string
	for i := range 6 {
		topic := fmt.Sprintf("many%d", i)
		for range 20 {
			if _, err := s.Hub.Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		q, tok = append(q, "topic="+topic), append(tok, topic+"=0:")
	}
	c := tt.OpenSSE(t, s.URL+"/api/sse?"+strings.Join(q, "&")+"&lastEventId="+strings.Join(tok, ","))
	for n := 0; n < 120; {
		line, err := c.Line(10 * time.Second)
		if err != nil {
			t.Fatalf("after %d of 120: %v", n, err)
		}
		switch {
		case strings.HasPrefix(line, "event: disconnect"), strings.HasPrefix(line, "event: gap"):
			t.Fatalf("after %d of 120: %s", n, line)
		case strings.HasPrefix(line, "data: {"):
			n++
		}
	}
}

// toldWhy reports whether a chunk of a slow reader's stream tells it why it lost messages: the
// slow-consumer close, or a gap notice (SSE event: gap, WebSocket op gap, STOMP gap:true).
func toldWhy(chunk string) bool {
	return strings.Contains(chunk, transport.ReasonSlow.Code) || strings.Contains(chunk, "event: gap") ||
		strings.Contains(chunk, `"op":"gap"`) || strings.Contains(chunk, "gap:true")
}
