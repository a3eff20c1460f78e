package amqp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/faultproxy"
	"github.com/rtlab/rtlab/internal/hub"
)

// recording is a subscription's sink: what it was given, and the gaps it was told of.
type recording struct {
	mu   sync.Mutex
	pubs []*hub.Publication
	gaps []string
}

func (r *recording) Deliver(p *hub.Publication) {
	r.mu.Lock()
	r.pubs = append(r.pubs, p)
	r.mu.Unlock()
}

func (r *recording) Gap(_ string, _ hub.Position, reason string) {
	r.mu.Lock()
	r.gaps = append(r.gaps, reason)
	r.mu.Unlock()
}

func (r *recording) get() ([]*hub.Publication, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*hub.Publication(nil), r.pubs...), append([]string(nil), r.gaps...)
}

// partitionNode is a node with a hub and one recording subscription.
type partitionNode struct {
	b    *amqp.Broker
	hub  *hub.Hub
	sink *recording
}

func startPartitionNode(t *testing.T, url string, cfg amqp.Config, topic string) *partitionNode {
	t.Helper()
	cfg.Logger = brokertest.Logger()
	b, err := amqp.New(context.Background(), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Config{Broker: b})
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.Run(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = h.Close() })
	n := &partitionNode{b: b, hub: h, sink: &recording{}}
	s, _, err := h.Subscribe(context.Background(), topic, n.sink, hub.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { h.Unsubscribe(s) })
	return n
}

func (n *partitionNode) publish(topic string) (*hub.Publication, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`)})
}

// TestPartitionNoticed black-holes one node's path to RabbitMQ (no FIN, no RST: packets go
// nowhere) while another node publishes. The cut-off node must notice within a few heartbeats,
// be unready until it is back, and then deliver every publication history still holds, in
// order, without telling its subscriber of a gap. The cut-off node is a follower, then the
// sequencer (the first node up), whose role moves to the other node meanwhile.
func TestPartitionNoticed(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	t.Run("Follower", func(t *testing.T) { testPartition(t, srv, false) })
	t.Run("Sequencer", func(t *testing.T) { testPartition(t, srv, true) })
}

func testPartition(t *testing.T, srv *brokertest.Server, cutFirst bool) {
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	const heartbeat = time.Second
	cfg := amqp.Config{Name: brokertest.Namespace(), Heartbeat: heartbeat, Direct: direct.Direct}
	topic := "chat/partition"
	viaProxy := strings.Replace(srv.URL, srv.Addr, proxy.Addr(), 1)
	var onTime, cut *partitionNode
	if cutFirst {
		cut = startPartitionNode(t, viaProxy, cfg, topic)
		onTime = startPartitionNode(t, srv.URL, cfg, topic)
	} else {
		onTime = startPartitionNode(t, srv.URL, cfg, topic)
		cut = startPartitionNode(t, viaProxy, cfg, topic)
	}

	var acked []*hub.Publication
	publish := func(n *partitionNode) {
		t.Helper()
		eventually.Nil(t, 30*time.Second, func() error {
			p, err := n.publish(topic)
			if err != nil {
				return err
			}
			acked = append(acked, p)
			return nil
		})
	}
	publish(cut)
	publish(onTime)
	waitFor(t, cut.sink, acked[len(acked)-1])

	proxy.Set(faultproxy.BlackHole)
	cutAt := time.Now()
	noticed := watchReady(t, cut.b, cutAt)
	const blackout = 15 * time.Second
	for time.Since(cutAt) < blackout {
		// Paced: one publication at a time, each acknowledged before the next. The cut-off
		// node tries too; what it is answered does not matter here.
		if p, err := onTime.publish(topic); err == nil {
			acked = append(acked, p)
		}
		_, _ = cut.publish(topic)
		time.Sleep(200 * time.Millisecond)
	}
	// The documented bound is about 2 heartbeats; the black hole's length leaves room for a
	// loaded machine.
	d, ok := noticed()
	if !ok {
		t.Fatalf("the cut-off node stayed ready through a %v black hole (heartbeat %v)", blackout, heartbeat)
	}
	t.Logf("the cut-off node was unready %v after the cut", d.Round(10*time.Millisecond))
	proxy.Set(faultproxy.Pass)
	eventually.Nil(t, 60*time.Second, func() error {
		if !cut.b.Ready() {
			return errors.New("the cut-off node is not ready again")
		}
		return nil
	})
	for range 10 {
		publish(onTime)
		publish(cut)
	}
	for i, n := range []*partitionNode{onTime, cut} {
		waitFor(t, n.sink, acked[len(acked)-1])
		got, gaps := n.sink.get()
		if len(gaps) > 0 {
			t.Errorf("node %d: told of gaps %q though history held every publication", i, gaps)
		}
		if err := sameAs(got, acked); err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

// watchReady polls b from since until the test ends, and returns how long b took to be unready.
func watchReady(t *testing.T, b *amqp.Broker, since time.Time) func() (time.Duration, bool) {
	done := make(chan struct{})
	var once sync.Once
	var took time.Duration
	go func() {
		for b.Ready() {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		took = time.Since(since)
		once.Do(func() { close(done) })
	}()
	return func() (time.Duration, bool) {
		select {
		case <-done:
			return took, true
		default:
			once.Do(func() { close(done) })
			return 0, false
		}
	}
}

// waitFor waits until sink has received want.
func waitFor(t *testing.T, sink *recording, want *hub.Publication) {
	t.Helper()
	eventually.Nil(t, 60*time.Second, func() error {
		got, _ := sink.get()
		if len(got) == 0 || got[len(got)-1].Epoch != want.Epoch || got[len(got)-1].Offset < want.Offset {
			return fmt.Errorf("subscriber has %d publications, not yet %d/%s", len(got), want.Offset, want.Epoch)
		}
		return nil
	})
}

// sameAs reports how got differs from a run of consecutive offsets of one epoch holding every
// publication in want. (A publish that failed may still have been published: got may hold more.)
func sameAs(got, want []*hub.Publication) error {
	have := make(map[hub.Position]bool, len(got))
	for i, p := range got {
		if i > 0 && (p.Epoch != got[i-1].Epoch || p.Offset != got[i-1].Offset+1) {
			return fmt.Errorf("received %d/%s after %d/%s", p.Offset, p.Epoch, got[i-1].Offset, got[i-1].Epoch)
		}
		have[hub.Position{Offset: p.Offset, Epoch: p.Epoch}] = true
	}
	for _, p := range want {
		if !have[hub.Position{Offset: p.Offset, Epoch: p.Epoch}] {
			return fmt.Errorf("acknowledged %d/%s never received", p.Offset, p.Epoch)
		}
	}
	return nil
}
