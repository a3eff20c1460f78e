package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestLostMessagesAreReadFromTheStream: republished messages that never reach a node (here its
// core subscription is gone for a while, as when a slow subscription overflows) show as a jump
// in offsets at the next one, and the node reads what it missed from the stream and delivers
// everything in order, each once.
func TestLostMessagesAreReadFromTheStream(t *testing.T) {
	srv := brokertest.StartNATS(t)
	ns := brokertest.Namespace()
	open := func() *Broker {
		b, err := New(context.Background(), srv.URL, Config{Stream: ns, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	pub, sub := open(), open()
	rec := brokertest.NewRecorder()
	for _, b := range []*Broker{pub, sub} {
		if err := b.Run(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	const topic = "chat/lossy"
	if err := sub.Subscribe(ctx, topic); err != nil {
		t.Fatal(err)
	}
	publish := func(i int) *hub.Publication {
		p, err := pub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	publish(1)
	rec.WaitCount(t, topic, 1, 10*time.Second)
	f := sub.followed(topic)
	if err := f.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 4; i++ {
		publish(i)
	}
	s, err := sub.nc.Subscribe(liveSubject(f.l, topic), func(m *natsgo.Msg) { sub.onLive(f, m) })
	if err != nil {
		t.Fatal(err)
	}
	f.sub = s
	if err := sub.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	last := publish(5)
	rec.WaitCount(t, topic, 5, 10*time.Second)
	if err := rec.CheckOrder(topic); err != nil {
		t.Fatal(err)
	}
	got := rec.Get(topic)
	if len(got) != 5 || got[4].Offset != last.Offset || got[4].Epoch != last.Epoch {
		t.Fatalf("delivered %d publications, the last %+v; want 5 up to %d/%s", len(got), got[len(got)-1], last.Offset, last.Epoch)
	}
	hr, err := sub.History(ctx, topic, 0, 0)
	if err != nil || len(hr.Publications) != 5 || hr.Top.Offset != 5 {
		t.Fatalf("History after the gap: %+v, %v", hr, err)
	}
}
