package transport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/stomp"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestSTOMPSessionOutlivesBrokerOutage: with redis-server stopped, a SEND is refused alone (in
// its RECEIPT, or on /user/queue/errors without one) and a SUBSCRIBE is refused for its
// subscription; the session stays open, and once Redis is back the same session publishes
// and subscribes again.
func TestSTOMPSessionOutlivesBrokerOutage(t *testing.T) {
	srv := brokertest.StartRedis(t) // skips without redis-server, unless RTLAB_REQUIRE_BROKERS
	b, err := redis.New(context.Background(), srv.URL, redis.Config{Prefix: brokertest.Namespace(), Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	s := tt.NewServer(t, tt.ServerConfig{Broker: b})
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Connect("passcode:alice\nheart-beat:0,0\n")
	c.Send("SUBSCRIBE\nid:errs\ndestination:/user/queue/errors\nreceipt:s0\n\n\x00")
	awaitReceipt(t, c, "s0")
	c.Send("SUBSCRIBE\nid:a\ndestination:/topic/out/a\nreceipt:s1\n\n\x00")
	awaitReceipt(t, c, "s1")

	srv.Stop()
	// The broker may take a moment to call itself unavailable; until then a SEND may still
	// be answered otherwise, but never with the session's end.
	n := 0
	refusedSend := func() bool {
		n++
		id := fmt.Sprintf("p%d", n)
		c.Send("SEND\ndestination:/topic/out/a\nreceipt:" + id + "\n\n{\"n\":1}\x00")
		return tt.Header(awaitReceipt(t, c, id), "refused") == "unavailable"
	}
	for give := time.Now().Add(time.Minute); !refusedSend(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(give) {
			t.Fatal("no SEND refused as unavailable within a minute of stopping Redis")
		}
	}
	c.Send("SEND\ndestination:/topic/out/a\n\n{\"n\":2}\x00")
	if m := awaitFrame(t, c, func(f stomp.Frame) bool { return tt.Header(f, "subscription") == "errs" }); tt.Header(m, "refused") != "unavailable" {
		t.Fatalf("on /user/queue/errors: %v", m.Headers)
	}
	c.Send("SUBSCRIBE\nid:b\ndestination:/topic/out/b\nreceipt:s2\n\n\x00")
	m := awaitFrame(t, c, func(f stomp.Frame) bool { return tt.Header(f, "subscription") == "b" })
	if tt.Header(m, "refused") != "unavailable" {
		t.Fatalf("SUBSCRIBE during the outage: %v, want refused:unavailable", m.Headers)
	}
	if r := awaitReceipt(t, c, "s2"); tt.Header(r, "refused") != "unavailable" {
		t.Fatalf("its RECEIPT: %v", r.Headers)
	}

	srv.Start()
	for give := time.Now().Add(time.Minute); refusedSend(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(give) {
			t.Fatal("SENDs still refused a minute after Redis came back")
		}
	}
	c.Send("SUBSCRIBE\nid:b\ndestination:/topic/out/b\nreceipt:s3\n\n\x00")
	if r := awaitReceipt(t, c, "s3"); tt.Header(r, "refused") != "" || tt.Header(r, "epoch") == "" {
		t.Fatalf("SUBSCRIBE after the outage: RECEIPT %v", r.Headers)
	}
}

// awaitReceipt reads frames until the RECEIPT for id, failing on an ERROR or a closed session.
func awaitReceipt(t *testing.T, c *tt.STOMPConn, id string) stomp.Frame {
	t.Helper()
	return awaitFrame(t, c, func(f stomp.Frame) bool {
		return f.Command == stomp.CmdReceipt && tt.Header(f, "receipt-id") == id
	})
}

// awaitFrame reads frames until one that match accepts, failing on an ERROR or a closed
// session.
func awaitFrame(t *testing.T, c *tt.STOMPConn, match func(stomp.Frame) bool) stomp.Frame {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := c.NextFrame(time.Until(deadline))
		if err != nil {
			t.Fatalf("the session ended or nothing came: %v", err)
		}
		if f.Command == stomp.CmdError {
			t.Fatalf("ERROR %s", tt.Header(f, "message"))
		}
		if match(f) {
			return f
		}
	}
}
