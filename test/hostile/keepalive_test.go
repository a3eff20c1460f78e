package hostile

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestBusySubscriberKept: the server pinged only connections it had written nothing to for
// --ping-interval, and drops a client it has heard nothing from for two intervals and 10 s. A
// WebSocket client that only receives, on a topic busy enough that it never went idle, was
// never pinged, so it had nothing to answer and was cut off (a bare EOF) every minute. Now
// every connection is pinged at least every interval; its pongs keep it.
func TestBusySubscriberKept(t *testing.T) {
	p := servertest.Start(t, bin, "--ping-interval", "1s") // dropped after 12 s of silence
	c := (tt.Dialer{}).WS(t, p.WS("/api/ws"))
	defer c.Close()
	c.Op("connected")
	c.Send(`{"op":"subscribe","topic":"news/busy"}`)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		hc := &http.Client{Timeout: 5 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if res, err := hc.Post(p.URL()+"/api/publish/news/busy", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i))); err == nil {
				res.Body.Close()
			}
		}
	}()
	start, n := time.Now(), 0
	for time.Since(start) < 15*time.Second {
		if _, err := c.Next(5 * time.Second); err != nil { // Next answers the server's pings
			t.Fatalf("a subscriber that only receives was cut off after %v and %d messages: %v", time.Since(start).Round(time.Millisecond), n, err)
		}
		n++
	}
}
