// Package brokertest is the conformance suite every hub.Broker passes (memory, Redis, NATS,
// RabbitMQ), plus helpers that start real broker servers for tests and a shared benchmark.
//
// A broker's test calls Run with a Harness that makes nodes: broker instances that share one
// server, as several rtlab processes would. The suite checks the hub.Broker contract: offsets
// start at 1 and are contiguous, History's since/limit/Oldest, that two nodes publishing
// concurrently see the same publications in the same order with the same offsets, that
// Subscribe-then-History misses nothing, and that a server restart, a wipe of the server's data,
// and a node cut off from the server while the others publish (with or without a wipe) are
// survived without silent loss.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// Harness describes one broker implementation to the suite.
type Harness struct {
	// NewNode returns a new broker for one node, not yet running: the suite calls Run and Close.
	// Nodes made with the same namespace share topics (when Shared); different namespaces must
	// not see each other's topics, so subtests stay independent on one server.
	NewNode func(tb testing.TB, namespace string, policy hub.HistoryPolicy) hub.Broker
	// NewNodeFunc is NewNode with a policy per topic, for the durable-topic tests (durable
	// topics have a negative TTL). Nil skips them.
	NewNodeFunc func(tb testing.TB, namespace string, policy func(topic string) hub.HistoryPolicy) hub.Broker
	// NewNodeVia is NewNode for a node that reaches the server at addr instead (a Relay's), so
	// a test can cut that node off alone. Nil skips the tests that need it.
	NewNodeVia func(tb testing.TB, addr, namespace string, policy hub.HistoryPolicy) hub.Broker
	// Shared is true when nodes share topics through a server. The memory broker is not: each
	// node is its own world, and the multi-node checks run on one node.
	Shared bool
	// Server is the broker server; nil for memory. The outage test stops and starts it.
	Server *Server
	// Durable is true when offsets and history survive Server.Stop and Start (NATS and RabbitMQ
	// with their data directory). When false (Redis without persistence) a restart loses them,
	// and the suite expects a new epoch rather than offsets continuing under the old one.
	Durable bool
	// Flush wipes the broker's data for namespace while nodes stay connected (FLUSHALL, a
	// deleted stream or queue), as an operator's mistake would. Nil skips that test.
	Flush func(tb testing.TB, namespace string)
	// FlushKeepsHistory is true when the nodes, not the wiped data, hold what History answers
	// (RabbitMQ: the log only feeds nodes that start or catch up). After a Flush the suite
	// then expects offsets to continue in the same epoch, on every node.
	FlushKeepsHistory bool
}

// External returns the Harness of a broker whose nodes share srv. open makes one node, not yet
// running, that connects to url (srv.URL, or the same with another host:port), keeps its topics
// under namespace ns and follows policy; wipe deletes ns's data on the server while nodes stay
// connected (nil skips that test).
func External(srv *Server, open func(url, ns string, policy func(topic string) hub.HistoryPolicy) (hub.Broker, error), wipe func(ns string) error) Harness {
	newNode := func(tb testing.TB, url, ns string, policy hub.HistoryPolicy) hub.Broker {
		tb.Helper()
		b, err := open(url, ns, func(string) hub.HistoryPolicy { return policy })
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	h := Harness{
		Server:  srv,
		Shared:  true,
		Durable: srv.Durable,
		NewNode: func(tb testing.TB, ns string, policy hub.HistoryPolicy) hub.Broker {
			tb.Helper()
			return newNode(tb, srv.URL, ns, policy)
		},
		NewNodeVia: func(tb testing.TB, addr, ns string, policy hub.HistoryPolicy) hub.Broker {
			tb.Helper()
			return newNode(tb, strings.Replace(srv.URL, srv.Addr, addr, 1), ns, policy)
		},
		NewNodeFunc: func(tb testing.TB, ns string, policy func(string) hub.HistoryPolicy) hub.Broker {
			tb.Helper()
			b, err := open(srv.URL, ns, policy)
			if err != nil {
				tb.Fatal(err)
			}
			return b
		},
	}
	if wipe != nil {
		h.Flush = func(tb testing.TB, ns string) {
			tb.Helper()
			if err := wipe(ns); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return h
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Run("OffsetsStartAtOneAndAreContiguous", func(t *testing.T) { testOffsets(t, h) })
	t.Run("EmptyTopic", func(t *testing.T) { testEmptyTopic(t, h) })
	t.Run("HistorySinceLimitOldest", func(t *testing.T) { testHistory(t, h) })
	t.Run("HistoryTTL", func(t *testing.T) { testTTL(t, h) })
	t.Run("TopicNames", func(t *testing.T) { testTopicNames(t, h) })
	t.Run("NodesPublishConcurrently", func(t *testing.T) { testConcurrent(t, h) })
	t.Run("NodesPublishToABusyTopic", func(t *testing.T) { testBusyTopic(t, h) })
	t.Run("SubscribeThenHistoryMissesNothing", func(t *testing.T) { testSubscribeThenHistory(t, h) })
	t.Run("HandlerReadsHistory", func(t *testing.T) { testHandlerReadsHistory(t, h) })
	t.Run("ServerRestart", func(t *testing.T) { testRestart(t, h, restart) })
	t.Run("ServerHangs", func(t *testing.T) { testRestart(t, h, hang) })
	t.Run("DataLostWhileConnected", func(t *testing.T) { testFlush(t, h) })
	t.Run("NodeCutOff", func(t *testing.T) { testLateNode(t, h, false) })
	t.Run("NodeCutOffWhileDataLost", func(t *testing.T) { testLateNode(t, h, true) })
	t.Run("Presence", func(t *testing.T) { testPresence(t, h) })
	t.Run("DurableTopics", func(t *testing.T) { testDurable(t, h) })
	t.Run("DurableWindowPagedBack", func(t *testing.T) { testDurablePaging(t, h) })
	t.Run("RetriesPublishOnce", func(t *testing.T) { testRetries(t, h) })
}

// Concurrent runs the suite's NodesPublishConcurrently check alone, for a broker's own test of
// a configuration that changes how publications are appended.
func Concurrent(t *testing.T, h Harness) { testConcurrent(t, h) }

// OutageTopic is the topic the outage checks publish to (ServerRestart, ServerHangs).
const OutageTopic = "chat/outage"

// Outages runs the suite's ServerRestart and ServerHangs checks alone, for a broker's own test
// of an outage of part of its server: h.Server may be one process of several (the Redis Cluster
// master holding OutageTopic).
func Outages(t *testing.T, h Harness) {
	t.Run("ServerRestart", func(t *testing.T) { testRestart(t, h, restart) })
	t.Run("ServerHangs", func(t *testing.T) { testRestart(t, h, hang) })
}

// Namespace returns a fresh namespace name, unique per call.
func Namespace() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Node is a running broker with a Recorder as its handler.
type Node struct {
	hub.Broker
	Rec *Recorder
}

// StartNode makes a node with h.NewNode, runs it with a Recorder and closes it at cleanup.
func StartNode(tb testing.TB, h Harness, ns string, policy hub.HistoryPolicy) *Node {
	tb.Helper()
	rec := NewRecorder()
	return &Node{Broker: runNode(tb, h.NewNode(tb, ns, policy), rec), Rec: rec}
}

// runNode runs b with handler, closes it at cleanup and returns it.
func runNode(tb testing.TB, b hub.Broker, handler hub.Handler) hub.Broker {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.Run(ctx, handler); err != nil {
		cancel()
		tb.Fatalf("Run: %v", err)
	}
	tb.Cleanup(func() {
		cancel()
		if err := b.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return b
}

// startNodes starts two nodes on namespace ns, or one when h is not Shared.
func startNodes(tb testing.TB, h Harness, ns string, policy hub.HistoryPolicy) []*Node {
	tb.Helper()
	nodes := []*Node{StartNode(tb, h, ns, policy)}
	if h.Shared {
		nodes = append(nodes, StartNode(tb, h, ns, policy))
	}
	return nodes
}

// startPair returns two nodes that share namespace ns, or one node twice when h is not Shared.
func startPair(tb testing.TB, h Harness, ns string, policy hub.HistoryPolicy) (a, b *Node) {
	tb.Helper()
	nodes := startNodes(tb, h, ns, policy)
	return nodes[0], nodes[len(nodes)-1]
}

// Publish publishes data to topic and fails the test on error.
func (n *Node) Publish(tb testing.TB, topic string, data string) *hub.Publication {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := n.Broker.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(data), Sender: "tester", Type: "TALK"})
	if err != nil {
		tb.Fatalf("Publish(%s): %v", topic, err)
	}
	return p
}

// History reads history and fails the test on error.
func (n *Node) History(tb testing.TB, topic string, since uint64, limit int) hub.HistoryResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, err := n.Broker.History(ctx, topic, since, limit)
	if err != nil {
		tb.Fatalf("History(%s, %d, %d): %v", topic, since, limit, err)
	}
	return hr
}

// Subscribe subscribes and fails the test on error.
func (n *Node) Subscribe(tb testing.TB, topic string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Broker.Subscribe(ctx, topic); err != nil {
		tb.Fatalf("Subscribe(%s): %v", topic, err)
	}
}

func testOffsets(t *testing.T, h Harness) {
	n := StartNode(t, h, Namespace(), hub.HistoryPolicy{})
	topic := "chat/offsets"
	n.Subscribe(t, topic)
	var epoch string
	start := time.Now().Truncate(time.Millisecond)
	for i := 1; i <= 20; i++ {
		p := n.Publish(t, topic, fmt.Sprintf(`{"i":%d}`, i))
		if p.Offset != uint64(i) {
			t.Fatalf("publication %d got offset %d", i, p.Offset)
		}
		if i == 1 {
			epoch = p.Epoch
			if epoch == "" {
				t.Fatal("empty epoch")
			}
		} else if p.Epoch != epoch {
			t.Fatalf("epoch changed from %q to %q at offset %d", epoch, p.Epoch, p.Offset)
		}
		if p.Topic != topic || p.Sender != "tester" || p.Type != "TALK" || string(p.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("publication %d: %+v", i, p)
		}
		if p.Time.Before(start) || p.Time.After(time.Now().Add(time.Second)) || !p.Time.Equal(p.Time.Truncate(time.Millisecond)) {
			t.Fatalf("publication %d: time %v not in [%v, now] at millisecond precision", i, p.Time, start)
		}
	}
	hr := n.History(t, topic, 0, 0)
	if hr.Top != (hub.Position{Offset: 20, Epoch: epoch}) || hr.Oldest != 1 || len(hr.Publications) != 20 {
		t.Fatalf("History: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
	}
	for i, p := range hr.Publications {
		if p.Offset != uint64(i+1) || p.Epoch != epoch || string(p.Data) != fmt.Sprintf(`{"i":%d}`, i+1) ||
			p.Sender != "tester" || p.Type != "TALK" || p.Topic != topic {
			t.Fatalf("History[%d] = %+v", i, p)
		}
	}
	n.Rec.WaitCount(t, topic, 20, 10*time.Second)
	if err := n.Rec.CheckOrder(topic); err != nil {
		t.Fatal(err)
	}
	got := n.Rec.Get(topic)
	for i, p := range got {
		if p.Offset != uint64(i+1) || p.Epoch != epoch || !p.Time.Equal(hr.Publications[i].Time) {
			t.Fatalf("delivered[%d] = %+v, history has %+v", i, p, hr.Publications[i])
		}
	}
	if err := n.Rec.Err(); err != nil {
		t.Fatal(err)
	}
}

func testEmptyTopic(t *testing.T, h Harness) {
	n := StartNode(t, h, Namespace(), hub.HistoryPolicy{})
	hr := n.History(t, "chat/never", 0, 0)
	if hr.Top.Offset != 0 || hr.Oldest != 0 || len(hr.Publications) != 0 {
		t.Fatalf("History of an unused topic: %+v", hr)
	}
	p := n.Publish(t, "chat/never", `{}`)
	if p.Offset != 1 || p.Epoch == "" {
		t.Fatalf("first publication: offset %d epoch %q", p.Offset, p.Epoch)
	}
	if hr.Top.Epoch != "" && hr.Top.Epoch != p.Epoch {
		t.Fatalf("History promised epoch %q, first publication has %q", hr.Top.Epoch, p.Epoch)
	}
}

func testHistory(t *testing.T, h Harness) {
	n := StartNode(t, h, Namespace(), hub.HistoryPolicy{Size: 10})
	topic := "location/hist"
	var epoch string
	for i := 1; i <= 25; i++ {
		epoch = n.Publish(t, topic, fmt.Sprintf(`{"i":%d}`, i)).Epoch
	}
	top := hub.Position{Offset: 25, Epoch: epoch}
	cases := []struct {
		since       uint64
		limit       int
		first, last uint64 // 0, 0 for none
	}{
		{0, 0, 16, 25},
		{5, 0, 16, 25}, // since fell out of history: what is retained
		{15, 0, 16, 25},
		{20, 0, 21, 25},
		{20, 2, 21, 22},
		{0, 3, 16, 18},
		{24, 0, 25, 25},
		{25, 0, 0, 0},
		{30, 0, 0, 0},
		{24, 100, 25, 25},
	}
	for _, c := range cases {
		hr := n.History(t, topic, c.since, c.limit)
		if hr.Top != top || hr.Oldest != 16 {
			t.Errorf("History(since %d, limit %d): top %+v oldest %d, want %+v and 16", c.since, c.limit, hr.Top, hr.Oldest, top)
		}
		want := 0
		if c.first != 0 {
			want = int(c.last - c.first + 1)
		}
		if len(hr.Publications) != want {
			t.Errorf("History(since %d, limit %d): %d publications, want %d", c.since, c.limit, len(hr.Publications), want)
			continue
		}
		for i, p := range hr.Publications {
			if p.Offset != c.first+uint64(i) || p.Epoch != epoch || string(p.Data) != fmt.Sprintf(`{"i":%d}`, p.Offset) {
				t.Errorf("History(since %d, limit %d)[%d] = offset %d epoch %q data %s", c.since, c.limit, i, p.Offset, p.Epoch, p.Data)
			}
		}
	}
}

func testTTL(t *testing.T, h Harness) {
	const ttl = 1500 * time.Millisecond
	n := StartNode(t, h, Namespace(), hub.HistoryPolicy{Size: 10, TTL: ttl})
	topic := "chat/ttl"
	var first *hub.Publication
	for i := 1; i <= 3; i++ {
		p := n.Publish(t, topic, `{}`)
		if first == nil {
			first = p
		}
	}
	if hr := n.History(t, topic, 0, 0); len(hr.Publications) != 3 {
		t.Fatalf("History right after publishing: %d publications, want 3", len(hr.Publications))
	}
	eventually.Nil(t, ttl+5*time.Second, func() error {
		hr := n.History(t, topic, 0, 0)
		if len(hr.Publications) != 0 || hr.Oldest != 0 {
			return notYet("%d publications retained past the TTL (oldest %d)", len(hr.Publications), hr.Oldest)
		}
		// Either the topic keeps its position (memory, Redis), or it is forgotten with its history
		// (NATS, RabbitMQ); never a position with expired publications.
		if hr.Top.Offset != 0 && hr.Top != (hub.Position{Offset: 3, Epoch: first.Epoch}) {
			return fmt.Errorf("top after expiry: %+v", hr.Top)
		}
		return nil
	})
	p := n.Publish(t, topic, `{}`)
	// After expiry offsets either continue in the same epoch, or start over in a new one. Offsets
	// must never restart under the old epoch.
	if p.Epoch == first.Epoch && p.Offset != 4 {
		t.Fatalf("after expiry: offset %d in the old epoch %q", p.Offset, p.Epoch)
	}
	if p.Epoch != first.Epoch && p.Offset != 1 {
		t.Fatalf("after expiry: new epoch %q starts at %d", p.Epoch, p.Offset)
	}
	hr := n.History(t, topic, 0, 0)
	if len(hr.Publications) != 1 || hr.Publications[0].Offset != p.Offset || hr.Oldest != p.Offset ||
		hr.Top != (hub.Position{Offset: p.Offset, Epoch: p.Epoch}) {
		t.Fatalf("History after publishing again: %+v", hr)
	}
}

func testTopicNames(t *testing.T, h Harness) {
	ns := Namespace()
	a, b := startPair(t, h, ns, hub.HistoryPolicy{})
	// Every topic character, and names that differ only where a naive encoding would collide.
	topics := []string{"a.b", "a/b", "a:b", "a_b", "a-b", "a@b", "a..b", ".a.", "A.b", "x", "0",
		"notify/alice@example.com", "chat/room-1_2.3:4", "ab", "ab.", longName()}
	for _, tp := range topics {
		if err := hub.ValidateTopic(tp); err != nil {
			t.Fatalf("test topic %q invalid: %v", tp, err)
		}
		b.Subscribe(t, tp)
	}
	for i, tp := range topics {
		p := a.Publish(t, tp, fmt.Sprintf(`{"i":%d}`, i))
		if p.Offset != 1 || p.Topic != tp {
			t.Fatalf("first publication on %q: offset %d topic %q", tp, p.Offset, p.Topic)
		}
	}
	for i, tp := range topics {
		b.Rec.WaitCount(t, tp, 1, 10*time.Second)
		got := b.Rec.Get(tp)
		if len(got) != 1 || got[0].Topic != tp || string(got[0].Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("topic %q delivered %d publications, first %+v", tp, len(got), got[0])
		}
		hr := b.History(t, tp, 0, 0)
		if len(hr.Publications) != 1 || hr.Publications[0].Topic != tp {
			t.Fatalf("History(%q): %+v", tp, hr)
		}
	}
}

func longName() string {
	b := make([]byte, hub.MaxTopicLen)
	for i := range b {
		b[i] = "ab.:/@-_9"[i%9]
	}
	return string(b)
}

// testConcurrent publishes from several goroutines on each of two nodes to three topics and
// checks that both nodes deliver every publication exactly once, in offset order, with the same
// offsets and epochs, and that the acknowledged offsets are those delivered.
func testConcurrent(t *testing.T, h Harness) {
	publishConcurrently(t, h, []string{"chat/c1", "location/c.2", "notify/c@3"}, 4, 30)
}

// testBusyTopic has every node publish to one topic as fast as it can: a node that keeps losing
// the race for the next offset must still get its publications in, not give up.
func testBusyTopic(t *testing.T, h Harness) {
	publishConcurrently(t, h, []string{"chat/busy"}, 4, 1000)
}

// publishConcurrently publishes from goroutines goroutines per node, each publishing each times
// to the topics in turn, and checks that every node acknowledged, delivered and keeps the same
// contiguous offsets in one epoch.
func publishConcurrently(t *testing.T, h Harness, topics []string, goroutines, each int) {
	ns := Namespace()
	nodes := startNodes(t, h, ns, hub.HistoryPolicy{Size: 2 * goroutines * each})
	for _, n := range nodes {
		for _, tp := range topics {
			n.Subscribe(t, tp)
		}
	}
	var (
		mu   sync.Mutex
		acks = map[string][]*hub.Publication{}
		wg   sync.WaitGroup
	)
	errc := make(chan error, len(nodes)*goroutines)
	for ni, n := range nodes {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					tp := topics[(g+i)%len(topics)]
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					p, err := n.Broker.Publish(ctx, hub.PublishRequest{Topic: tp,
						Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"g":%d,"i":%d}`, ni, g, i))})
					cancel()
					if err != nil {
						errc <- fmt.Errorf("node %d publish: %w", ni, err)
						return
					}
					mu.Lock()
					acks[tp] = append(acks[tp], p)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for _, tp := range topics {
		want := acks[tp]
		sort.Slice(want, func(i, j int) bool { return want[i].Offset < want[j].Offset })
		for i, p := range want {
			if p.Offset != uint64(i+1) || p.Epoch != want[0].Epoch {
				t.Fatalf("%s: acknowledged offsets not 1..%d in one epoch: #%d is %d/%s", tp, len(want), i, p.Offset, p.Epoch)
			}
		}
		for ni, n := range nodes {
			n.Rec.WaitCount(t, tp, len(want), 20*time.Second)
			if err := n.Rec.CheckOrder(tp); err != nil {
				t.Fatalf("node %d: %v", ni, err)
			}
			got := n.Rec.Get(tp)
			if len(got) != len(want) {
				t.Fatalf("node %d %s: delivered %d, want %d (duplicates?)", ni, tp, len(got), len(want))
			}
			for i := range got {
				if !samePub(got[i], want[i]) {
					t.Fatalf("node %d %s: delivered[%d] = %+v, acknowledged %+v", ni, tp, i, got[i], want[i])
				}
			}
			hr := n.History(t, tp, 0, 0)
			if len(hr.Publications) != len(want) || hr.Top != (hub.Position{Offset: uint64(len(want)), Epoch: want[0].Epoch}) {
				t.Fatalf("node %d History(%s): %d publications, top %+v", ni, tp, len(hr.Publications), hr.Top)
			}
			for i, p := range hr.Publications {
				if !samePub(p, want[i]) {
					t.Fatalf("node %d %s: History[%d] = %+v, acknowledged %+v", ni, tp, i, p, want[i])
				}
			}
		}
	}
	for ni, n := range nodes {
		if err := n.Rec.Err(); err != nil {
			t.Fatalf("node %d: %v", ni, err)
		}
	}
}

func samePub(a, b *hub.Publication) bool {
	return a.Topic == b.Topic && a.Offset == b.Offset && a.Epoch == b.Epoch && a.Time.Equal(b.Time) &&
		a.Sender == b.Sender && a.Type == b.Type && string(a.Data) == string(b.Data)
}

// testSubscribeThenHistory checks the Subscribe contract: after Subscribe returns, whatever a
// History call does not show is delivered.
func testSubscribeThenHistory(t *testing.T, h Harness) {
	ns := Namespace()
	pub, sub := startPair(t, h, ns, hub.HistoryPolicy{Size: 1000})
	topic := "chat/race"
	const total = 300
	half := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= total; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := pub.Broker.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`)})
			cancel()
			if err != nil {
				done <- err
				return
			}
			if i == total/3 {
				close(half)
			}
		}
		done <- nil
	}()
	<-half
	sub.Subscribe(t, topic)
	hr := sub.History(t, topic, 0, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	have := map[uint64]bool{}
	for _, p := range hr.Publications {
		have[p.Offset] = true
	}
	if len(hr.Publications) == 0 || hr.Publications[0].Offset != 1 {
		t.Fatalf("History right after Subscribe: %d publications", len(hr.Publications))
	}
	eventually.Nil(t, 20*time.Second, func() error {
		for _, p := range sub.Rec.Get(topic) {
			have[p.Offset] = true
		}
		for o := uint64(1); o <= total; o++ {
			if !have[o] {
				return notYet("offset %d neither in History (which ended at %d) nor delivered", o, hr.Top.Offset)
			}
		}
		return nil
	})
	if err := sub.Rec.CheckOrder(topic); err != nil {
		t.Fatal(err)
	}
}

// testHandlerReadsHistory checks what the hub relies on when it fills a gap: a handler may
// read History from inside HandlePublication, while other publishes to the topic are under way,
// and the broker neither waits on itself nor answers with less than it delivered.
func testHandlerReadsHistory(t *testing.T, h Harness) {
	const topic, goroutines, each = "chat/reentrant", 4, 25
	r := &historyReader{b: h.NewNode(t, Namespace(), hub.HistoryPolicy{})}
	b := runNode(t, r.b, r)
	(&Node{Broker: b}).Subscribe(t, topic)
	published := make(chan error, goroutines*each)
	for range goroutines {
		go func() {
			for range each {
				pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := b.Publish(pctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{"n":1}`)})
				pcancel()
				published <- err
			}
		}()
	}
	timeout := time.After(30 * time.Second)
	for range goroutines * each {
		select {
		case err := <-published:
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
		case <-timeout:
			t.Fatalf("publishes still waiting after 30 s, with %d deliveries: the broker waits on its own delivery", r.count())
		}
	}
	eventually.Within(20*time.Second, func() bool { return r.count() >= goroutines*each })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen != goroutines*each {
		t.Errorf("%d deliveries, want %d", r.seen, goroutines*each)
	}
	for _, err := range r.errs {
		t.Error(err)
	}
}

// historyReader reads the topic's history from inside every delivery, as the hub does when it
// sees a gap.
type historyReader struct {
	b    hub.Broker
	mu   sync.Mutex
	seen int
	errs []error
}

func (r *historyReader) HandlePublication(p *hub.Publication) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hr, err := r.b.History(ctx, p.Topic, p.Offset-1, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	switch {
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("History inside the delivery of %d: %w", p.Offset, err))
	case hr.Top.Epoch == p.Epoch && hr.Top.Offset < p.Offset:
		r.errs = append(r.errs, fmt.Errorf("History inside the delivery of %d says the topic is at %d", p.Offset, hr.Top.Offset))
	}
}

func (r *historyReader) HandleResubscribed() {}

func (r *historyReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen
}

// outage is how a test takes the broker server away and brings it back.
type outage struct {
	begin, end func(*Server)
	// losesData reports whether history is gone afterwards: a restarted server without
	// persistence (Redis here) forgets it; a hung one keeps it.
	losesData func(Harness) bool
	// failWithin bounds how long a publish may take to fail once the server is gone. A stopped
	// server closes its sockets and publishes fail at once; a hung one keeps them open and silent,
	// and a node notices only when heartbeats go unanswered (docs/brokers.md: 2.5 s to 4 s).
	failWithin time.Duration
}

var (
	restart = outage{begin: (*Server).Stop, end: (*Server).Start, losesData: func(h Harness) bool { return !h.Durable }, failWithin: 3 * time.Second}
	hang    = outage{begin: (*Server).Hang, end: (*Server).Wake, losesData: func(Harness) bool { return false }, failWithin: 9 * time.Second}
)

// testRestart takes the broker server away (o: stopped, or hung) and brings it back while two
// nodes publish, with a real hub on each node, and checks what subscribers see: offsets
// contiguous within each epoch (gaps are filled from history after HandleResubscribed), every
// acknowledged publication delivered when the data survives, and a new epoch when it does not.
func testRestart(t *testing.T, h Harness, o outage) {
	if h.Server == nil {
		t.Skip("no server to restart")
	}
	ns := Namespace()
	policy := hub.HistoryPolicy{Size: 10000}
	topic := OutageTopic
	nodes := []*hubNode{
		startHubNode(t, h, ns, policy, topic),
		startHubNode(t, h, ns, policy, topic),
	}
	load := startPublishers(nodes, topic, o.failWithin)
	eventually.True(t, 10*time.Second, "publications before the restart", func() bool { return load.count() >= 20 })
	before := load.count()

	takeServerAway(t, h, o, nodes, topic)
	time.Sleep(time.Second) // the outage lasts a while longer, the nodes retrying: not a wait for anything
	bringServerBack(t, h, o, nodes)
	atRecovery := load.count()
	eventually.Nil(t, 30*time.Second, func() error {
		if n := load.count(); n < atRecovery+50 {
			return notYet("%d publications since recovery", n-atRecovery)
		}
		return nil
	})
	acks := load.stop()
	if n := load.slowFail.Load(); n > 0 {
		t.Errorf("%d publishes took longer than %v to fail", n, o.failWithin)
	}
	t.Logf("%d publications acknowledged (%d before the stop), %d failed", len(acks), before, load.failures.Load())

	keeps := !o.losesData(h)
	want := checkAcknowledged(t, acks, keeps)
	for ni, n := range nodes {
		checkNodeCaughtUp(t, ni, n, topic, want, acks[len(acks)-1], keeps)
	}
}

// publishers publish to one topic from every node, every 5 ms each, until stopped.
type publishers struct {
	mu       sync.Mutex
	acks     []*hub.Publication // guarded by mu
	failures atomic.Int64
	slowFail atomic.Int64 // failures that took longer than failWithin
	done     chan struct{}
	wg       sync.WaitGroup
}

func startPublishers(nodes []*hubNode, topic string, failWithin time.Duration) *publishers {
	l := &publishers{done: make(chan struct{})}
	for ni, n := range nodes {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				case <-time.After(5 * time.Millisecond):
				}
				l.publish(n, topic, failWithin, json.RawMessage(fmt.Sprintf(`{"n":%d,"i":%d}`, ni, i)))
			}
		}()
	}
	return l
}

// publish makes one publication and records its outcome.
func (l *publishers) publish(n *hubNode, topic string, failWithin time.Duration, data json.RawMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	p, err := n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: data})
	if err != nil {
		l.failures.Add(1)
		if time.Since(start) > failWithin {
			l.slowFail.Add(1)
		}
		return
	}
	l.mu.Lock()
	l.acks = append(l.acks, p)
	l.mu.Unlock()
}

func (l *publishers) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// stop ends the publishing and returns the acknowledged publications in order of their answers.
func (l *publishers) stop() []*hub.Publication {
	close(l.done)
	l.wg.Wait()
	return l.acks
}

// takeServerAway begins the outage and checks that every node notices it and that publishing
// then fails, fast, with hub.ErrNotReady.
func takeServerAway(t *testing.T, h Harness, o outage, nodes []*hubNode, topic string) {
	stopped := time.Now()
	o.begin(h.Server)
	t.Logf("server gone in %v", time.Since(stopped).Round(time.Millisecond))
	eventually.Nil(t, 15*time.Second, func() error {
		for i, n := range nodes {
			if n.b.Ready() {
				return notYet("node %d still ready with the server gone", i)
			}
		}
		return nil
	})
	for i, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{"down":true}`)})
		cancel()
		if err == nil {
			t.Fatalf("node %d: publish succeeded with the server gone", i)
		}
		// Refused as not ready, or, when it went out before the hang was noticed, of unknown
		// outcome (sent, never answered): either way the caller is told, never left hanging.
		if !errors.Is(err, hub.ErrNotReady) && !errors.Is(err, hub.ErrOutcomeUnknown) {
			t.Errorf("node %d: publish error %q wraps neither hub.ErrNotReady nor hub.ErrOutcomeUnknown", i, err)
		}
		if d := time.Since(start); d > o.failWithin {
			t.Errorf("node %d: publish took %v to fail", i, d)
		}
	}
	t.Logf("nodes not ready %v after the outage began", time.Since(stopped).Round(time.Millisecond))
}

// bringServerBack ends the outage and waits until every node is ready and has resubscribed.
func bringServerBack(t *testing.T, h Harness, o outage, nodes []*hubNode) {
	started := time.Now()
	o.end(h.Server)
	t.Logf("server back in %v", time.Since(started).Round(time.Millisecond))
	eventually.Nil(t, 60*time.Second, func() error {
		for i, n := range nodes {
			if !n.b.Ready() {
				return notYet("node %d not ready after the server came back", i)
			}
			if n.resub.Load() == 0 {
				return notYet("node %d: HandleResubscribed not called", i)
			}
		}
		return nil
	})
	t.Logf("nodes ready and resubscribed %v after the server came back", time.Since(started).Round(time.Millisecond))
}

// checkAcknowledged checks the acknowledged publications across the outage: no offset twice in
// an epoch, one epoch when the broker kept its data (keeps), a new one when it did not. It
// returns those of the last epoch, by offset.
func checkAcknowledged(t *testing.T, acks []*hub.Publication, keeps bool) []*hub.Publication {
	byEpoch := map[string][]*hub.Publication{}
	for _, p := range acks {
		byEpoch[p.Epoch] = append(byEpoch[p.Epoch], p)
	}
	for e, ps := range byEpoch {
		// A publish whose answer was lost with the connection fails although it was stored, so
		// acknowledged offsets may skip one; they never repeat.
		sort.Slice(ps, func(i, j int) bool { return ps[i].Offset < ps[j].Offset })
		for i := 1; i < len(ps); i++ {
			if ps[i].Offset == ps[i-1].Offset {
				t.Fatalf("offset %d acknowledged twice in epoch %s", ps[i].Offset, e)
			}
		}
	}
	last := acks[len(acks)-1]
	if keeps {
		if len(byEpoch) != 1 {
			t.Fatalf("the broker kept its data but the epoch changed across the outage: %d epochs", len(byEpoch))
		}
	} else if len(byEpoch) < 2 {
		t.Fatalf("history was lost in the restart but offsets continue in epoch %s (now at %d)", acks[0].Epoch, last.Offset)
	}
	return byEpoch[last.Epoch]
}

// checkNodeCaughtUp waits until node ni's subscriber has reached the highest acknowledged
// offset (want: the last epoch's acknowledged publications, by offset), then checks that it saw
// offsets that follow, every acknowledged one when the data was kept, and that History's top is
// not behind last, the last publication acknowledged.
func checkNodeCaughtUp(t *testing.T, ni int, n *hubNode, topic string, want []*hub.Publication, last *hub.Publication, keeps bool) {
	high := want[len(want)-1]
	eventually.Nil(t, 20*time.Second, func() error {
		got := n.sink.get()
		if len(got) == 0 || got[len(got)-1].Epoch != high.Epoch || got[len(got)-1].Offset < high.Offset {
			return notYet("node %d: subscriber has %d publications, not yet %d/%s", ni, len(got), high.Offset, high.Epoch)
		}
		return nil
	})
	got := n.sink.get()
	if err := checkFollows(got, nil); err != nil {
		t.Fatalf("node %d: subscriber saw %v", ni, err)
	}
	if keeps {
		// Everything acknowledged was delivered, exactly once.
		seen := map[uint64]bool{}
		for _, p := range got {
			seen[p.Offset] = true
		}
		for _, p := range want {
			if !seen[p.Offset] {
				t.Fatalf("node %d: acknowledged offset %d never delivered", ni, p.Offset)
			}
		}
	}
	hr, err := n.b.History(context.Background(), topic, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Top.Epoch != last.Epoch || hr.Top.Offset < last.Offset {
		t.Fatalf("node %d: History top %+v behind the last acknowledged %d/%s", ni, hr.Top, last.Offset, last.Epoch)
	}
}

// sinkRecorder is a hub.Sink that keeps what it is given, and where it was told of a gap.
type sinkRecorder struct {
	mu   sync.Mutex
	pubs []*hub.Publication
	told map[int]bool // a gap was reported right before pubs[i]
}

func (s *sinkRecorder) Gap(string, hub.Position, string) {
	s.mu.Lock()
	if s.told == nil {
		s.told = make(map[int]bool)
	}
	s.told[len(s.pubs)] = true
	s.mu.Unlock()
}

// toldBefore reports whether a gap was reported right before the i-th publication.
func (s *sinkRecorder) toldBefore(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.told[i]
}

func (s *sinkRecorder) Deliver(p *hub.Publication) {
	s.mu.Lock()
	s.pubs = append(s.pubs, p)
	s.mu.Unlock()
}

func (s *sinkRecorder) get() []*hub.Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*hub.Publication(nil), s.pubs...)
}

// countResubscribed wraps b so that the calls to its handler's HandleResubscribed are counted.
func countResubscribed(b hub.Broker) (hub.Broker, *atomic.Int64) {
	c := &countingBroker{Broker: b}
	return c, &c.n
}

type countingBroker struct {
	hub.Broker
	n atomic.Int64
}

func (c *countingBroker) Run(ctx context.Context, h hub.Handler) error {
	return c.Broker.Run(ctx, &countingHandler{Handler: h, n: &c.n})
}

type countingHandler struct {
	hub.Handler
	n *atomic.Int64
}

func (c *countingHandler) HandleResubscribed() {
	c.n.Add(1)
	c.Handler.HandleResubscribed()
}

// hubNode is a node with a real hub and one recording subscription.
type hubNode struct {
	b     hub.Broker
	resub *atomic.Int64
	hub   *hub.Hub
	sink  *sinkRecorder
}

func startHubNode(t *testing.T, h Harness, ns string, policy hub.HistoryPolicy, topic string) *hubNode {
	t.Helper()
	return startHub(t, h.NewNode(t, ns, policy), topic)
}

// startHub runs a hub on b with one recording subscription to topic.
func startHub(t *testing.T, b hub.Broker, topic string) *hubNode {
	t.Helper()
	b, resub := countResubscribed(b)
	hb := hub.New(hub.Config{Broker: b})
	ctx, cancel := context.WithCancel(context.Background())
	if err := hb.Run(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = hb.Close() })
	n := &hubNode{b: b, resub: resub, hub: hb}
	n.sink = n.subscribe(t, topic)
	return n
}

// subscribe adds a recording subscription to topic on n's hub.
func (n *hubNode) subscribe(t *testing.T, topic string) *sinkRecorder {
	t.Helper()
	sink := &sinkRecorder{}
	s, _, err := n.hub.Subscribe(context.Background(), topic, sink, hub.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { n.hub.Unsubscribe(s) })
	return sink
}

// testFlush wipes the broker's data under connected nodes: publications after it must start a
// new epoch, never continue (or restart) offsets under the old one, and every node must agree.
func testFlush(t *testing.T, h Harness) {
	if h.Flush == nil {
		t.Skip("no way to wipe this broker's data")
	}
	ns := Namespace()
	topic := "chat/flush"
	nodes := []*hubNode{
		startHubNode(t, h, ns, hub.HistoryPolicy{}, topic),
		startHubNode(t, h, ns, hub.HistoryPolicy{}, topic),
	}
	publish := func(n *hubNode) (*hub.Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`)})
	}
	var old *hub.Publication
	for range 5 {
		p, err := publish(nodes[0])
		if err != nil {
			t.Fatal(err)
		}
		old = p
	}
	h.Flush(t, ns)
	var first *hub.Publication
	eventually.Nil(t, 30*time.Second, func() error {
		p, err := publish(nodes[1])
		if err != nil {
			return notYet("publish after the flush: %v", err)
		}
		first = p
		return nil
	})
	eventually.Nil(t, 30*time.Second, func() error {
		for i, n := range nodes {
			if !n.b.Ready() {
				return notYet("node %d not ready after the flush", i)
			}
		}
		return nil
	})
	switch {
	case h.FlushKeepsHistory && (first.Epoch != old.Epoch || first.Offset <= old.Offset):
		t.Fatalf("after the data was lost, %d/%s follows %d/%s: the nodes hold the history, want it continued", first.Offset, first.Epoch, old.Offset, old.Epoch)
	case !h.FlushKeepsHistory && first.Epoch == old.Epoch:
		t.Fatalf("after the data was lost, offsets continue in epoch %s at %d", first.Epoch, first.Offset)
	}
	// A publish that failed while the nodes noticed the loss may still have been appended, so the
	// first acknowledged one can be past offset 1 (or old's next); history starts at 1 either way.
	// Nodes may also be unavailable for a moment while they notice: such publishes fail
	// plainly, and are retried.
	last := first
	for i := range 4 {
		eventually.Nil(t, 30*time.Second, func() error {
			p, err := publish(nodes[i%2])
			if errors.Is(err, hub.ErrNotReady) || errors.Is(err, hub.ErrOutcomeUnknown) {
				return notYet("publish after the flush: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			last = p
			return nil
		})
	}
	if last.Epoch != first.Epoch || last.Offset < first.Offset+4 {
		t.Fatalf("after the flush: last publication %d/%s, want at least %d/%s", last.Offset, last.Epoch, first.Offset+4, first.Epoch)
	}
	for ni, n := range nodes {
		eventually.Nil(t, 30*time.Second, func() error {
			hr, err := n.b.History(context.Background(), topic, 0, 0)
			if err != nil {
				return err
			}
			if hr.Top != (hub.Position{Offset: last.Offset, Epoch: last.Epoch}) || len(hr.Publications) != int(last.Offset) || hr.Oldest != 1 {
				return notYet("node %d History: top %+v oldest %d, %d publications", ni, hr.Top, hr.Oldest, len(hr.Publications))
			}
			got := n.sink.get()
			if len(got) == 0 || got[len(got)-1].Epoch != last.Epoch || got[len(got)-1].Offset != last.Offset {
				return notYet("node %d: subscriber not at %d/%s yet", ni, last.Offset, last.Epoch)
			}
			return nil
		})
		got := n.sink.get()
		if err := checkFollows(got, nil); err != nil {
			t.Fatalf("node %d: subscriber saw %v", ni, err)
		}
	}
}

// testLateNode cuts one node off from the server (a partition; the other node stays connected),
// publishes on the connected node and, with wipe, first wipes the broker's data. The late
// node's subscribers must then receive what was published meanwhile, in order, before what comes
// next: not only what was published after it returned. One topic had deliveries on both nodes
// before the cut, the other none (its subscribers had only subscribed). Where what was missed
// is no longer retained (FlushKeepsHistory: the wipe took the log the late node catches up
// from), the subscriber must at least be told before the publication that follows.
func testLateNode(t *testing.T, h Harness, wipe bool) {
	if h.NewNodeVia == nil || h.Server == nil || (wipe && h.Flush == nil) {
		t.Skip("no way to cut one node off, or to wipe this broker's data")
	}
	ns := Namespace()
	busy, quiet := "chat/late", "chat/late-quiet"
	policy := hub.HistoryPolicy{}
	relay := StartRelay(t, h.Server.Addr)
	onTime := startHubNode(t, h, ns, policy, busy)
	late := startHub(t, h.NewNodeVia(t, relay.Addr, ns, policy), busy)
	nodes := []*hubNode{onTime, late}
	quietSinks := []*sinkRecorder{onTime.subscribe(t, quiet), late.subscribe(t, quiet)}

	publish := func(n *hubNode, topic string) *hub.Publication {
		t.Helper()
		var p *hub.Publication
		eventually.Nil(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			if p, err = n.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`)}); err != nil {
				return notYet("publish to %s: %v", topic, err)
			}
			return nil
		})
		return p
	}
	received := func(sink *sinkRecorder, want *hub.Publication) error {
		got := sink.get()
		if len(got) == 0 || got[len(got)-1].Epoch != want.Epoch || got[len(got)-1].Offset < want.Offset {
			return notYet("%s: subscriber has %d publications, not yet %d/%s", want.Topic, len(got), want.Offset, want.Epoch)
		}
		return nil
	}

	publish(late, busy)
	before := publish(onTime, busy)
	for i, n := range nodes {
		eventually.Nil(t, 10*time.Second, func() error { return wrapNode(i, received(n.sink, before)) })
	}

	relay.Cut()
	eventually.Nil(t, 15*time.Second, func() error {
		if late.b.Ready() {
			return notYet("the cut-off node is still ready")
		}
		return nil
	})
	if wipe {
		h.Flush(t, ns)
	}
	var meanwhile []*hub.Publication
	for range 3 {
		meanwhile = append(meanwhile, publish(onTime, busy), publish(onTime, quiet))
	}
	relay.Heal()
	eventually.Nil(t, 30*time.Second, func() error {
		if !late.b.Ready() {
			return notYet("the cut-off node is not ready again")
		}
		return nil
	})
	publish(onTime, busy)
	last := map[string]*hub.Publication{busy: publish(late, busy), quiet: publish(late, quiet)}

	for i, n := range nodes {
		for topic, sink := range map[string]*sinkRecorder{busy: n.sink, quiet: quietSinks[i]} {
			eventually.Nil(t, 20*time.Second, func() error { return wrapNode(i, received(sink, last[topic])) })
			got := sink.get()
			mayBeGone := wipe && h.FlushKeepsHistory
			var excused func(int) bool
			if mayBeGone {
				excused = sink.toldBefore
			}
			if err := checkFollows(got, excused); err != nil {
				t.Fatalf("node %d, %s: subscriber saw %v: %s", i, topic, err, positions(got))
			}
			if mayBeGone {
				continue
			}
			have := map[hub.Position]bool{}
			for _, p := range got {
				have[hub.Position{Offset: p.Offset, Epoch: p.Epoch}] = true
			}
			for _, p := range meanwhile {
				if p.Topic == topic && !have[hub.Position{Offset: p.Offset, Epoch: p.Epoch}] {
					t.Fatalf("node %d, %s: %d/%s, published while the node was cut off, never delivered; subscriber saw %s",
						i, topic, p.Offset, p.Epoch, positions(got))
				}
			}
		}
	}
}

func wrapNode(i int, err error) error {
	if err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	return nil
}

// checkFollows reports the first publication that does not follow its predecessor: the next
// offset of its epoch, or offset 1 of a new epoch (the tests keep every publication, so a new
// epoch entered later means its first ones were skipped). excused, when not nil, may excuse the
// i-th publication: its subscriber was told of a gap right before it.
func checkFollows(ps []*hub.Publication, excused func(i int) bool) error {
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		if (a.Epoch == b.Epoch && b.Offset == a.Offset+1) || (a.Epoch != b.Epoch && b.Offset == 1) {
			continue
		}
		if excused != nil && excused(i) {
			continue
		}
		return fmt.Errorf("%d/%s after %d/%s, a silent gap", b.Offset, b.Epoch, a.Offset, a.Epoch)
	}
	return nil
}

func positions(ps []*hub.Publication) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%s", p.Offset, p.Epoch)
	}
	return b.String()
}
