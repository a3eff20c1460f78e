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

// TestBlackholedPublishIsOutcomeUnknown: a follower whose path to RabbitMQ is black-holed
// hands a keyed publish over and hears nothing back: outcome unknown, not unavailable. After
// the heal its retry with the key is answered, and the publication is in history once, with
// the offset the retry was given.
func TestBlackholedPublishIsOutcomeUnknown(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg := amqp.Config{Name: brokertest.Namespace(), Heartbeat: 5 * time.Second, PublishTimeout: 3 * time.Second}
	const topic = "chat/late"
	seq := startPartitionNode(t, srv.URL, cfg, topic) // the first node up: the sequencer
	cut := startPartitionNode(t, strings.Replace(srv.URL, srv.Addr, proxy.Addr(), 1), cfg, topic)
	publish := func(n *partitionNode, key string) (*hub.Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{"k":"` + key + `"}`), Sender: "alice", Key: key})
	}
	eventually.Nil(t, 30*time.Second, func() error { _, err := publish(cut, "warm-up"); return err })
	proxy.Set(faultproxy.BlackHole)
	if _, err := publish(cut, "k-late"); !errors.Is(err, hub.ErrOutcomeUnknown) || errors.Is(err, hub.ErrNotReady) {
		t.Fatalf("a publish handed over into a black hole: %v, want outcome unknown", err)
	}
	proxy.Set(faultproxy.Pass)
	var retry *hub.Publication
	eventually.Nil(t, 60*time.Second, func() error {
		retry, err = publish(cut, "k-late")
		return err
	})
	next, err := publish(seq, "k-next")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, err := seq.b.History(ctx, topic, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var late []uint64
	for _, p := range hr.Publications {
		if string(p.Data) == `{"k":"k-late"}` {
			late = append(late, p.Offset)
		}
	}
	if len(late) != 1 || late[0] != retry.Offset || next.Offset != hr.Top.Offset {
		t.Fatalf("the keyed publication is at offsets %v (retry answered %d, duplicate %v); next at %d of %d",
			late, retry.Offset, retry.Duplicate, next.Offset, hr.Top.Offset)
	}
	t.Logf("retry answered offset %d, duplicate %v", retry.Offset, retry.Duplicate)
}

// TestRetryFoundAfterManyPublications: a keyed publish retried after more publications than
// the old fixed window held (16,384) is still answered with its position: ids are kept for
// the history TTL, up to Config.RetryIDs.
func TestRetryFoundAfterManyPublications(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	n := startPartitionNode(t, srv.URL, amqp.Config{Name: brokertest.Namespace(), Direct: direct.Direct}, "chat/idle")
	publish := func(topic, key string) (*hub.Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`), Sender: "alice", Key: key})
	}
	var first *hub.Publication
	eventually.Nil(t, 30*time.Second, func() (err error) { first, err = publish("kept", "k-first"); return err })
	const workers, each = 32, 540 // 17,280 publications
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := publish("flood", fmt.Sprintf("f-%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	again, err := publish("kept", "k-first")
	if err != nil || !again.Duplicate || again.Offset != first.Offset || again.Epoch != first.Epoch {
		t.Fatalf("retry after %d publications: %+v %v, want offset %d marked duplicate", workers*each, again, err, first.Offset)
	}
}
