package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestSSEStreamStaysOpenAndResumes: one stream of two topics carries every publication of both,
// stays open, and its last event id resumes both after a reconnect.
func TestSSEStreamStaysOpenAndResumes(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	c := tt.OpenSSE(t, s.URL+"/api/sse?topic=a&topic=b")
	for i := range 5 {
		s.Publish(t, "a", fmt.Sprintf(`{"i":%d}`, i))
	}
	s.Publish(t, "b", `{"b":1}`)
	var last tt.SSEEvent
	for i := range 6 {
		last = c.Next(5 * time.Second)
		var p tt.Publication
		if err := json.Unmarshal([]byte(last.Data), &p); err != nil {
			t.Fatalf("event %d data %q: %v", i, last.Data, err)
		}
		if i < 5 && (p.Topic != "a" || p.Offset != uint64(i+1)) {
			t.Fatalf("event %d: %+v", i, p)
		}
	}
	if !strings.HasPrefix(last.ID, "a=5:") || !strings.Contains(last.ID, ",b=1:") {
		t.Fatalf("resume token %q", last.ID)
	}
	// Later publications arrive on the same stream: it did not close after the first event.
	s.Publish(t, "a", `{"i":5}`)
	ev := c.Next(5 * time.Second)
	c.Close()

	// Missed publications while disconnected are replayed on reconnect with Last-Event-ID.
	s.Publish(t, "a", `{"i":6}`)
	s.Publish(t, "b", `{"b":2}`)
	c2 := tt.Dialer{}.SSE(t, s.URL+"/api/sse?topic=a&topic=b", ev.ID)
	got := map[string]uint64{}
	for range 2 {
		var p tt.Publication
		_ = json.Unmarshal([]byte(c2.Next(5*time.Second).Data), &p)
		got[p.Topic] = p.Offset
	}
	if got["a"] != 7 || got["b"] != 2 {
		t.Fatalf("resumed: %v", got)
	}
}

// TestSSEStreamAgeAndResume: a stream ends cleanly at its age (an /api/sse stream at
// --sse-max-age, a data stream at its own); each body holds every event published while it
// was open and ends with a retry: line, and a reconnect with Last-Event-ID loses nothing while
// publications keep coming. A stream of the other kind stays open meanwhile.
func TestSSEStreamAgeAndResume(t *testing.T) {
	const age = 150 * time.Millisecond
	dataStreams := func(mux *http.ServeMux, tr *transport.Server) {
		mux.HandleFunc("GET /data/sse", func(w http.ResponseWriter, r *http.Request) {
			maxAge := age
			if r.URL.Query().Has("forever") {
				maxAge = 0
			}
			tr.HandleDataSSE(w, r, r.URL.Query().Get("topic"), maxAge)
		})
	}
	for _, tc := range []struct {
		name, url, other string
		lim              transport.Limits
	}{
		{"data", "/data/sse?topic=data/5", "/api/sse?topic=news/open", transport.Limits{}},
		{"native", "/api/sse?topic=data/5", "/data/sse?topic=news/open&forever", transport.Limits{SSEMaxAge: age}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tt.NewServer(t, tt.ServerConfig{Limits: tc.lim, Routes: dataStreams})
			open := tt.OpenSSE(t, s.URL+tc.other)

			var published, streams atomic.Int64
			done := make(chan struct{})
			ctx, stop := context.WithCancel(context.Background())
			t.Cleanup(func() { stop(); <-done })
			go func() { // publishes until the client has read three whole streams
				defer close(done)
				hc := tt.Dialer{}.HTTP()
				for i := 1; streams.Load() < 3 && i <= 20_000 && ctx.Err() == nil; i++ {
					if _, err := tt.PublishHTTP(ctx, hc, tt.Dialer{}, s.URL, "data/5", fmt.Sprintf(`{"i":%d}`, i)); err != nil {
						if ctx.Err() == nil {
							t.Errorf("publish %d: %v", i, err)
						}
						return
					}
					published.Store(int64(i))
				}
			}()
			var got []int
			lastID := ""
			for n := 0; ; n++ {
				if n > 1000 {
					t.Fatalf("still missing events after %d streams: got %d of %d", n, len(got), published.Load())
				}
				url := s.URL + tc.url
				if lastID == "" {
					url += "&since=0" // from the first publication, however early it came
				}
				events, lastLine := tt.Dialer{}.SSE(t, url, lastID).Rest(20 * time.Second)
				if !strings.HasPrefix(lastLine, "retry:") {
					t.Fatalf("stream %d ends with %q, want a retry: line", n, lastLine)
				}
				for _, ev := range events {
					switch ev.Event {
					case "":
					case "disconnect":
						if tc.name == "data" || !strings.Contains(ev.Data, `"code":"max_age"`) {
							t.Fatalf("stream %d: %v", n, ev)
						}
						continue
					default:
						t.Fatalf("stream %d: unexpected %v", n, ev)
					}
					var d struct{ I int }
					data := ev.Data
					if tc.name == "native" {
						var p tt.Publication
						_ = json.Unmarshal([]byte(data), &p)
						data = string(p.Data)
					}
					if err := json.Unmarshal([]byte(data), &d); err != nil || d.I != len(got)+1 {
						t.Fatalf("stream %d: event %s after %d events (lost or reordered)", n, ev.Data, len(got))
					}
					got = append(got, d.I)
					lastID = ev.ID
				}
				streams.Add(1)
				select {
				case <-done:
					if len(got) == int(published.Load()) {
						t.Logf("%d publications over %d streams", len(got), n+1)
						if len(got) < 3 {
							t.Fatalf("only %d publications", len(got))
						}
						// The stream of the other kind is still open and delivering.
						s.Publish(t, "news/open", `{"i":0}`)
						for {
							if ev := open.Next(5 * time.Second); strings.Contains(ev.Data, `{"i":0}`) {
								return
							}
						}
					}
				default:
				}
			}
		})
	}
}

// TestSSEStreamWithNoTopicRetries: with the broker down, a stream none of whose topics can be
// subscribed is answered 200 with each topic refused, a disconnect (unavailable, reconnect) and
// a retry: line, then closed, so that EventSource retries instead of idling. It is never
// counted as a connection and gives its admission back: at one connection per address, the
// same client is answered alike again.
func TestSSEStreamWithNoTopicRetries(t *testing.T) {
	srv := brokertest.StartRedis(t) // skips without redis-server, unless RTLAB_REQUIRE_BROKERS
	b, err := redis.New(context.Background(), srv.URL, redis.Config{Prefix: brokertest.Namespace(), Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	s := tt.NewServer(t, tt.ServerConfig{Broker: b, Limits: transport.Limits{MaxConnsPerIP: 1}})
	url := s.URL + "/api/sse?topic=out/a&topic=out/b"
	srv.Stop()
	// The broker may take a moment to call itself unavailable; until then a stream opens.
	for give := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		c := tt.OpenSSE(t, url)
		ev, err := c.NextEvent(5 * time.Second)
		c.Close()
		if err == nil && ev.Event == "refused" {
			break
		}
		if time.Now().After(give) {
			t.Fatal("no topic refused within a minute of stopping Redis")
		}
	}
	for try := range 2 {
		c := tt.OpenSSE(t, url)
		if refused := refusedUntilDisconnect(t, c); len(refused) != 2 {
			t.Fatalf("try %d: refused %q, want both topics", try, refused)
		}
		if line, err := c.Line(30 * time.Second); line != "retry: 2000" {
			t.Fatalf("try %d: after the disconnect %q %v, want retry: 2000", try, line, err)
		}
		if _, err := c.NextEvent(30 * time.Second); err == nil {
			t.Fatalf("try %d: the stream went on", try)
		}
		c.Close()
		if n := s.Transport.ConnCount(); n != 0 {
			t.Fatalf("try %d: %d connections counted", try, n)
		}
	}
}

// refusedUntilDisconnect reads c's events up to its disconnect, which must say unavailable
// and reconnect, and returns the data of its refused events.
func refusedUntilDisconnect(t *testing.T, c *tt.SSEStream) (refused []string) {
	t.Helper()
	for {
		ev, err := c.NextEvent(30 * time.Second)
		if err != nil {
			t.Fatalf("stream ended before its disconnect: %v", err)
		}
		if ev.Event != "refused" {
			if ev.Event != "disconnect" || !strings.Contains(ev.Data, `"code":"unavailable"`) || !strings.Contains(ev.Data, `"reconnect":true`) {
				t.Fatalf("event %+v, want disconnect unavailable", ev)
			}
			return refused
		}
		refused = append(refused, ev.Data)
	}
}
