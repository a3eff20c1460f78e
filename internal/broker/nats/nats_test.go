package nats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/nats"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness(tb testing.TB) brokertest.Harness {
	srv := brokertest.StartNATS(tb)
	open := func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return nats.New(context.Background(), url, nats.Config{Stream: ns, Policy: policy, Logger: brokertest.Logger()})
	}
	deleteStream := func(ns string) error {
		nc, err := natsgo.Connect(srv.URL)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		return js.DeleteStream(context.Background(), ns)
	}
	return brokertest.External(srv, open, deleteStream)
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }

// TestNodeReceivesOnlyItsTopics: a node is sent the publications of the topics it subscribed,
// not the others, and History of a topic it does not follow still answers from the stream.
func TestNodeReceivesOnlyItsTopics(t *testing.T) {
	h := harness(t)
	ns := brokertest.Namespace()
	a := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
	b := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
	b.Subscribe(t, "chat/mine")
	for i := range 20 {
		a.Publish(t, "chat/other", fmt.Sprintf(`{"i":%d}`, i))
	}
	last := a.Publish(t, "chat/mine", `{}`)
	b.Rec.WaitCount(t, "chat/mine", 1, 10*time.Second)
	if got := b.Rec.Get("chat/other"); len(got) != 0 {
		t.Fatalf("a node that did not subscribe chat/other received %d of its publications", len(got))
	}
	if got := b.Rec.Get("chat/mine"); got[0].Offset != last.Offset || got[0].Epoch != last.Epoch {
		t.Fatalf("chat/mine delivered %+v, published %+v", got[0], last)
	}
	hr := b.History(t, "chat/other", 15, 0)
	if hr.Top.Offset != 20 || hr.Oldest != 1 || len(hr.Publications) != 5 || hr.Publications[0].Offset != 16 {
		t.Fatalf("History of a topic not followed: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
	}
	if hr := b.History(t, "chat/other", 20, 0); hr.Top.Offset != 20 || hr.Oldest != 1 || len(hr.Publications) != 0 {
		t.Fatalf("History with nothing new: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
	}
}

// TestStreamOfAnOlderRelease: a stream created without RePublish (as nodes of the previous
// release created it) gets it at a node's start, keeping its messages; a nats-server that cannot
// add it (2.9) makes the node refuse to start with a clear error.
func TestStreamOfAnOlderRelease(t *testing.T) {
	h := harness(t)
	ns := brokertest.Namespace()
	nc, err := natsgo.Connect(h.Server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: ns, Subjects: []string{ns + ".>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: 100, MaxAge: 10 * time.Minute, AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := nats.New(ctx, h.Server.URL, nats.Config{Stream: ns, Logger: brokertest.Logger()})
	if err != nil {
		if !strings.HasPrefix(nc.ConnectedServerVersion(), "2.9.") || !strings.Contains(err.Error(), "has no RePublish") {
			t.Fatalf("New on a stream without RePublish (nats-server %s): %v", nc.ConnectedServerVersion(), err)
		}
		t.Logf("nats-server %s: %v", nc.ConnectedServerVersion(), err)
		return
	}
	_ = b.Close()
	if info, err := s.Info(ctx); err != nil || info.Config.RePublish == nil {
		t.Fatalf("a node's start left the stream without RePublish: %v", err)
	}
	a := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
	other := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
	other.Subscribe(t, "chat/old")
	if p := a.Publish(t, "chat/old", `{}`); p.Offset != 1 {
		t.Fatalf("first publication at %d", p.Offset)
	}
	other.Rec.WaitCount(t, "chat/old", 1, 10*time.Second)
}
