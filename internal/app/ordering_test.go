package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/transport"
)

// TestOrderingUnderConcurrentPublishers publishes from several goroutines over several
// transports at once, and checks every transport's subscriber sees offsets 1..N exactly once,
// in order.
func TestOrderingUnderConcurrentPublishers(t *testing.T) {
	s := startServer(t, func(c *Config) { c.HistorySize = 5000 })
	const topic = "order/1"
	const perPublisher = 150

	wsc := dialWS(t, s.ws("/api/ws"))
	wsc.expectOp("connected")
	wsc.send(`{"op":"subscribe","topic":"` + topic + `"}`)
	wsc.expectOp("subscribed")
	st := dialSTOMP(t, s.ws("/api/stomp"))
	st.sendFrame("CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:1\ndestination:/topic/" + topic + "\nreceipt:r\n\n\x00")
	st.expect("CONNECTED")
	st.expect("RECEIPT")
	sse := dialSSE(t, s.URL+"/api/sse?topic="+topic, nil)

	// Publishers: two over HTTP, one over WebSocket, one over STOMP.
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perPublisher; j++ {
				s.post(t, "/api/publish/"+topic, fmt.Sprintf(`{"p":"http%d","j":%d}`, i, j), nil)
			}
		}()
	}
	wsPub := dialWS(t, s.ws("/api/ws"))
	stPub := dialSTOMP(t, s.ws("/api/stomp"))
	stPub.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
	stPub.expect("CONNECTED")
	wg.Add(2)
	go func() {
		defer wg.Done()
		for j := 0; j < perPublisher; j++ {
			wsPub.send(fmt.Sprintf(`{"op":"publish","topic":"%s","data":{"p":"ws","j":%d}}`, topic, j))
		}
	}()
	go func() {
		defer wg.Done()
		for j := 0; j < perPublisher; j++ {
			stPub.sendFrame(fmt.Sprintf("SEND\ndestination:/topic/%s\n\n{\"p\":\"stomp\",\"j\":%d}\x00", topic, j))
		}
	}()
	const total = 4 * perPublisher

	check := func(name string, next func() uint64) {
		t.Helper()
		for want := uint64(1); want <= total; want++ {
			if got := next(); got != want {
				t.Fatalf("%s: offset %d, want %d", name, got, want)
			}
		}
	}
	var cwg sync.WaitGroup
	cwg.Add(4)
	go func() {
		defer cwg.Done()
		check("ws", func() uint64 { return wsc.expectOp("message").Offset })
	}()
	go func() {
		defer cwg.Done()
		check("stomp", func() uint64 {
			m := st.expect("MESSAGE")
			v, _ := m.Get("offset")
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		})
	}()
	go func() {
		defer cwg.Done()
		check("sse", func() uint64 {
			var p pubMsg
			_ = json.Unmarshal([]byte(sse.next(10*time.Second).Data), &p)
			return p.Offset
		})
	}()
	go func() { // a long-polling client looping with since
		defer cwg.Done()
		var since uint64
		for since < total {
			var ans pollAnswer
			s.get(t, fmt.Sprintf("/api/poll/%s?since=%d&wait=5s&limit=1000", topic, since), &ans)
			for _, p := range ans.Publications {
				if p.Offset != since+1 {
					t.Errorf("long poll: offset %d after %d", p.Offset, since)
					return
				}
				since = p.Offset
			}
		}
	}()
	wg.Wait()
	cwg.Wait()
}

// TestSlowConsumerDoesNotDelayOthers stalls one client (it never reads) and checks the others
// keep receiving promptly, and that the stalled one is cut off with a stated reason.
func TestSlowConsumerDoesNotDelayOthers(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.HistorySize = 10
		// Room for a reader that is merely descheduled on a busy machine; the stalled client
		// still overflows it (about 3 MB is published).
		c.Limits.QueueBytes = 512 << 10
		c.Limits.WriteTimeout = 2 * time.Second
	})
	stalled := dialWSSmallBuffer(t, s.ws("/api/ws"))
	stalled.expectOp("connected")
	stalled.send(`{"op":"subscribe","topic":"fast"}`)
	stalled.expectOp("subscribed")
	// From here on the stalled client reads nothing; the kernel buffers fill, then its queue.

	fast := dialWS(t, s.ws("/api/ws"))
	fast.expectOp("connected")
	fast.send(`{"op":"subscribe","topic":"fast"}`)
	fast.expectOp("subscribed")

	payload := `{"blob":"` + string(make([]byte, 0)) + fmt.Sprintf("%01000d", 0) + `"}`
	const n = 3000 // ~3 MB: far beyond the stalled client's socket buffers plus its queue
	done := make(chan struct{})
	var maxLag time.Duration
	go func() {
		defer close(done)
		for want := uint64(1); want <= n; want++ {
			m := fast.expectOp("message")
			if m.Offset != want {
				t.Errorf("fast client: offset %d want %d", m.Offset, want)
				return
			}
			ts, _ := time.Parse(time.RFC3339Nano, m.Time)
			if lag := time.Since(ts); lag > maxLag {
				maxLag = lag
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		s.post(t, "/api/publish/fast", payload, nil)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("fast client did not receive everything")
	}
	// The stall must not hold the others up: far below the 2 s write timeout.
	if maxLag > time.Second {
		t.Errorf("fast client lagged %s behind publish", maxLag)
	}
	// A fully stalled socket cannot be told anything (its last write timed out mid-frame),
	// but the server counted why it cut it off.
	eventually.True(t, 10*time.Second, "stalled client cut off", func() bool {
		return metricValue(t, s, `rtlab_queue_overflows_total{transport="ws"}`) >= 1 ||
			metricValue(t, s, `rtlab_disconnects_total{reason="write_timeout",transport="ws"}`) >= 1
	})
	if _, err := stalled.read(10 * time.Second); err != nil {
		return
	}
	for {
		if _, err := stalled.read(5 * time.Second); err != nil {
			return // closed after what had been buffered
		}
	}
}

// TestSlowReaderIsToldWhy reads, but too slowly: its queue overflows and it is told why.
func TestSlowReaderIsToldWhy(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Limits.QueueBytes = 32 << 10 })
	slow := dialWSSmallBuffer(t, s.ws("/api/ws"))
	slow.expectOp("connected")
	slow.send(`{"op":"subscribe","topic":"s"}`)
	slow.expectOp("subscribed")
	reason := make(chan string, 1)
	go func() {
		for {
			b, err := slow.read(20 * time.Second)
			if err != nil {
				reason <- "closed without a reason: " + err.Error()
				return
			}
			var m pubMsg
			if json.Unmarshal(b, &m) == nil && m.Op == "disconnect" {
				reason <- m.Code
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// 12 MB in all: more than the server's socket send buffer can hide.
	payload := `{"blob":"` + fmt.Sprintf("%08000d", 0) + `"}`
	for i := 0; i < 1500; i++ {
		s.post(t, "/api/publish/s", payload, nil)
		select {
		case r := <-reason:
			if r != transport.ReasonSlow.Code {
				t.Fatalf("slow reader: %s", r)
			}
			return
		default:
		}
	}
	select {
	case r := <-reason:
		if r != transport.ReasonSlow.Code {
			t.Fatalf("slow reader: %s", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("slow reader was never cut off")
	}
}

// metricValue reads one sample from /metrics (0 when absent).
func metricValue(t testing.TB, s *testServer, series string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestShutdownTellsClientsToReconnect checks every streaming transport gets a reason.
func TestShutdownTellsClientsToReconnect(t *testing.T) {
	s := startServer(t, nil)
	wsc := dialWS(t, s.ws("/api/ws"))
	wsc.expectOp("connected")
	st := dialSTOMP(t, s.ws("/api/stomp"))
	st.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
	st.expect("CONNECTED")
	sse := dialSSE(t, s.URL+"/api/sse?topic=x", nil)
	lp := make(chan int, 1)
	go func() {
		var ans pollAnswer
		lp <- s.get(t, "/api/poll/x?since=0&wait=30s", &ans)
	}()
	time.Sleep(100 * time.Millisecond)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.app.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
	if m := wsc.expectOp("disconnect"); m.Code != "shutdown" || !m.Reconnect {
		t.Fatalf("ws: %+v", m)
	}
	if f := st.frame(5 * time.Second); f.Command != "ERROR" {
		t.Fatalf("stomp: %+v", f)
	}
	if ev := sse.next(5 * time.Second); ev.Event != "disconnect" {
		t.Fatalf("sse: %+v", ev)
	}
	select {
	case code := <-lp:
		if code != 200 {
			t.Fatalf("long poll at shutdown: %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll held shutdown")
	}
}
