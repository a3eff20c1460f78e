package transport_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// readerStackLimit is what an idle streaming connection's reader goroutine may hold of stack.
// The readers are shaped for it (wsReader.readMessage, hub.read, stompConn.onSubscribe): a
// message's handling grows the stack to 8 KiB, and a reader parked in a small frame gives half
// of it back at the next GC. One that parks deeper keeps 8 KiB, and 10,000 idle connections
// then cost 40 MiB more (BENCHMARKS.md, idle connections).
const readerStackLimit = 4 << 10

// TestIdleReaderStack opens idle connections that have each subscribed (the deepest thing an
// idle listener did), then measures the goroutine stacks the server holds for them: the
// growth of runtime.MemStats.StackInuse over the connections, after collections that let the
// runtime shrink stacks, divided by their number. The clients are plain sockets read by the
// test itself, so every goroutine added is the server's: the reader of each connection (its
// writer goroutine exits once its queue is written, and the test waits for that). The average
// may pass 4 KiB by a little (a few goroutines of the runtime or the test, stack spans kept
// in per-P caches: at most tens of KiB over all the connections) but not by what 8 KiB readers
// add: a quarter of them at 8 KiB already passes the margin of 10%.
//
// The race detector grows every frame and a stack's guard, so its readers keep 8 KiB whatever
// the code does: under -race the test checks the goroutine count and the measurement alone,
// against 8 KiB, so that it still catches a reader that grows past that.
func TestIdleReaderStack(t *testing.T) {
	const n = 400
	limit := readerStackLimit
	if raceEnabled {
		limit = 2 * readerStackLimit
	}
	margin := limit / 10
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{})
		open := idleOpener(t, s, k)
		open(0) // the server's first connection starts what all share (pools, the keepalive tick)
		settle()
		g0, st0 := runtime.NumGoroutine(), stackInuse()
		for i := 1; i <= n; i++ {
			open(i)
		}
		eventually.True(t, 10*time.Second, fmt.Sprintf("%d reader goroutines", n), func() bool {
			return runtime.NumGoroutine()-g0 <= n
		})
		settle()
		g1, st1 := runtime.NumGoroutine(), stackInuse()
		if g1-g0 < n-5 || g1-g0 > n+5 {
			t.Fatalf("%d goroutines added for %d connections: want one each", g1-g0, n)
		}
		per := (int(st1) - int(st0)) / n
		t.Logf("%s: %d connections, %d goroutines, %d bytes of stack each", k, n, g1-g0, per)
		if per > limit+margin {
			t.Errorf("an idle %s connection holds %d bytes of goroutine stack, want at most %d (+%d): "+
				"its reader parks in a deeper frame than it did (see wsReader.readMessage)", k, per, limit, margin)
		}
	}, tt.Streaming...)
}

// idleOpener returns how to open the i-th idle connection of kind k: subscribed to a topic of
// its own, answered, and then left alone.
func idleOpener(t *testing.T, s *tt.Server, k tt.Kind) func(i int) {
	d := tt.Dialer{}
	switch k {
	case tt.WS:
		return func(i int) {
			c := d.WS(t, s.WS("/api/ws"))
			c.Op("connected")
			c.Send(fmt.Sprintf(`{"op":"subscribe","topic":"idle/%d"}`, i))
			c.Op("subscribed")
		}
	case tt.STOMP:
		return func(i int) {
			c := d.STOMP(t, s.WS("/api/stomp"))
			c.Connect("")
			c.Send(fmt.Sprintf("SUBSCRIBE\nid:1\ndestination:/topic/idle/%d\nreceipt:r\n\n\x00", i))
			c.Expect("RECEIPT")
		}
	case tt.SSE:
		return func(i int) {
			c := d.SSE(t, fmt.Sprintf("%s/api/sse?topic=idle/%d", s.URL, i), "")
			for {
				line, err := c.Line(5 * time.Second)
				if err != nil {
					t.Fatalf("SSE stream %d: %v", i, err)
				}
				if line == ": connected" {
					return
				}
			}
		}
	}
	t.Fatalf("%s does not stream", k)
	return nil
}

// settle lets what is running finish (goroutines of earlier tests' servers ending, writers
// draining: up to a few seconds until their count holds still) and the runtime shrink stacks:
// each GC halves a stack less than a quarter used, so several are needed to reach the floor.
func settle() {
	for n, still, deadline := runtime.NumGoroutine(), 0, time.Now().Add(5*time.Second); still < 3 && time.Now().Before(deadline); {
		time.Sleep(30 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			still++
		} else {
			n, still = m, 0
		}
	}
	for range 4 {
		time.Sleep(20 * time.Millisecond)
		runtime.GC()
	}
}

func stackInuse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}
