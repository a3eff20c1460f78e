package amqp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/shard"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestSequencerFailover: the node that assigns offsets goes away while the other publishes.
// The other takes over: every publication it had asked for is published once, offsets go on
// in the same epoch without a gap, and a node started afterwards has the same history.
// With Direct, the second node's requests went straight to the first node until it closed.
func TestSequencerFailover(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	t.Run("Queue", func(t *testing.T) { testFailover(t, srv, amqp.Config{}) })
	t.Run("Direct", func(t *testing.T) { testFailover(t, srv, direct) })
}

func testFailover(t *testing.T, srv *brokertest.Server, cfg amqp.Config) {
	reg := prometheus.NewRegistry()
	h := harness(srv, cfg, reg)
	ns := brokertest.Namespace()
	policy := hub.HistoryPolicy{Size: 1000}
	const topic = "chat/failover"

	// Made and run by hand, so that the test closes it.
	first := h.NewNode(t, ns, policy)
	if err := first.Run(context.Background(), brokertest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second := brokertest.StartNode(t, h, ns, policy)
	second.Subscribe(t, topic)
	// The first node is the sequencer queue's first consumer, so it is the sequencer.
	first0 := second.Publish(t, topic, `{"i":0}`)
	sequencer := func(node string) float64 { return gauge(t, reg, "rtlab_broker_sequencer", node) }
	if sequencer("1") != 1 || sequencer("2") != 0 {
		t.Fatalf("sequencer gauges: first %v, second %v; want 1 and 0", sequencer("1"), sequencer("2"))
	}

	const n = 200
	acks := []*hub.Publication{first0}
	for i := 1; i < n; i++ {
		if i == n/2 {
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		p, err := second.Broker.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		cancel()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		acks = append(acks, p)
	}
	if sequencer("2") != 1 {
		t.Fatal("the second node did not become the sequencer")
	}
	if n := counter(t, reg, "rtlab_broker_direct_requests_total"); (n > 0) != (cfg.Direct != "") {
		t.Errorf("%v request messages went straight to the sequencer's node, with Direct %q", n, cfg.Direct)
	}
	for i, p := range acks {
		if p.Epoch != first0.Epoch || p.Offset != uint64(i+1) {
			t.Fatalf("publication %d acknowledged as %d/%s, want %d/%s", i, p.Offset, p.Epoch, i+1, first0.Epoch)
		}
	}
	second.Rec.WaitCount(t, topic, n, 10*time.Second)
	if err := second.Rec.CheckOrder(topic); err != nil {
		t.Fatal(err)
	}
	if got := len(second.Rec.Get(topic)); got != n {
		t.Fatalf("the second node's subscriber received %d publications, want %d", got, n)
	}

	third := brokertest.StartNode(t, h, ns, policy)
	want := second.History(t, topic, 0, 0)
	got := third.History(t, topic, 0, 0)
	if got.Top != want.Top || len(got.Publications) != n {
		t.Fatalf("a node started later: top %+v with %d publications, want %+v with %d", got.Top, len(got.Publications), want.Top, n)
	}
	for i, p := range got.Publications {
		if w := want.Publications[i]; p.Offset != w.Offset || string(p.Data) != string(w.Data) || !p.Time.Equal(w.Time) {
			t.Fatalf("a node started later has %d %s, the running node %d %s", p.Offset, p.Data, w.Offset, w.Data)
		}
	}
}

// gauge returns the value of gauge name labelled node="node" in reg.
func gauge(tb testing.TB, reg *prometheus.Registry, name, node string) float64 {
	tb.Helper()
	return ofNode(tb, reg, name, node).GetGauge().GetValue()
}

// ofNode returns the series of metric name labelled node="node" in reg.
func ofNode(tb testing.TB, reg *prometheus.Registry, name, node string) *dto.Metric {
	tb.Helper()
	for _, m := range named(tb, reg, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "node" && l.GetValue() == node {
				return m
			}
		}
	}
	tb.Fatalf("%s not found for node %s", name, node)
	return nil
}

// TestIdleNodeReceivesNothing: a node that follows no topic and is not the sequencer receives
// nothing live of what the others publish, yet its History shows it (asked of the sequencer);
// once it subscribes to a topic it receives that topic alone, and its History of it, taken at
// Subscribe and fed live, has everything.
func TestIdleNodeReceivesNothing(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	for _, c := range []struct {
		name string
		cfg  amqp.Config
	}{{"Direct", direct}, {"Queue", amqp.Config{}}} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := harness(srv, c.cfg, reg)
			ns := brokertest.Namespace()
			brokertest.StartNode(t, h, ns, hub.HistoryPolicy{}) // the first consumer: the sequencer
			pub := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
			idle := brokertest.StartNode(t, h, ns, hub.HistoryPolicy{})
			received := func(node string) float64 { return counterOf(t, reg, "rtlab_broker_received_total", node) }
			topics := []string{"location/a", "location/b", "notify/c"}
			for i := range 30 {
				pub.Publish(t, topics[i%3], fmt.Sprintf(`{"i":%d}`, i))
			}
			if g := gauge(t, reg, "rtlab_broker_sequencer", "1"); g != 1 {
				t.Fatalf("the first node is not the sequencer (gauge %v)", g)
			}
			if n := received("3"); n != 0 {
				t.Errorf("an idle node received %v publications", n)
			}
			if n := received("2"); n != 0 {
				t.Errorf("the publishing node, following nothing, received %v publications (want answers only)", n)
			}
			hr := idle.History(t, "location/a", 0, 0)
			if hr.Top.Offset != 10 || len(hr.Publications) != 10 || hr.Oldest != 1 {
				t.Fatalf("the idle node's History of a topic it does not follow: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
			}

			idle.Subscribe(t, "location/b")
			for i := range 5 {
				pub.Publish(t, "location/a", fmt.Sprintf(`{"j":%d}`, i))
				pub.Publish(t, "location/b", fmt.Sprintf(`{"j":%d}`, i))
			}
			idle.Rec.WaitCount(t, "location/b", 5, 10*time.Second)
			hr = idle.History(t, "location/b", 0, 0)
			if hr.Top.Offset != 15 || len(hr.Publications) != 15 || hr.Oldest != 1 {
				t.Fatalf("History of a followed topic: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
			}
			for i, p := range hr.Publications {
				if p.Offset != uint64(i+1) {
					t.Fatalf("History of a followed topic: #%d is offset %d", i, p.Offset)
				}
			}
			if n := received("3"); n != 5 {
				t.Errorf("the node following one topic received %v publications, want its 5", n)
			}
			if got := len(idle.Rec.Get("location/a")); got != 0 {
				t.Errorf("a topic the node does not follow was delivered %d times", got)
			}
			if err := idle.Unsubscribe(context.Background(), "location/b"); err != nil {
				t.Fatal(err)
			}
			pub.Publish(t, "location/b", `{}`)
			if hr := idle.History(t, "location/b", 0, 0); hr.Top.Offset != 16 {
				t.Errorf("History after Unsubscribe: top %+v, want 16", hr.Top)
			}
		})
	}
}

// counterOf returns counter name labelled node="node" in reg.
func counterOf(tb testing.TB, reg *prometheus.Registry, name, node string) float64 {
	tb.Helper()
	return ofNode(tb, reg, name, node).GetCounter().GetValue()
}

// TestSequencersSpread: three nodes over three vhost shards, all started before anything is
// published. The node that started first is every shard queue's first consumer, yet each
// node ends up the sequencer of exactly one shard, the others declining what is over their
// share; publications of every node to topics of every shard reach every node in order, with
// consecutive offsets, and each node's own in the order it published them.
func TestSequencersSpread(t *testing.T) {
	const shards, nodes, each = 3, 3, 40
	srv := brokertest.StartRabbitVhosts(t, shards)
	reg := prometheus.NewRegistry()
	ns := brokertest.Namespace()
	topics := shardTopics(shards, 2)
	var (
		bs   [nodes]*shard.Broker
		recs [nodes]*brokertest.Recorder
	)
	for n := range nodes {
		bs[n], recs[n] = spreadNode(t, srv, ns, shards, n+1, reg)
	}
	// Subscribing asks each shard's sequencer for history: the first requests.
	for n := range nodes {
		for _, topic := range topics {
			if err := bs[n].Subscribe(context.Background(), topic); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every node publishes to every topic at once, each topic in its own order.
	var wg sync.WaitGroup
	acks := make([][][]*hub.Publication, nodes)
	for n := range nodes {
		acks[n] = make([][]*hub.Publication, len(topics))
		for ti, topic := range topics {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					p, err := bs[n].Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"node":%d,"i":%d}`, n, i))})
					if err != nil {
						t.Errorf("node %d publish %s #%d: %v", n+1, topic, i, err)
						return
					}
					acks[n][ti] = append(acks[n][ti], p)
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	checkSpread(t, reg, shards, nodes)
	for n := range nodes {
		for ti, topic := range topics {
			recs[n].WaitCount(t, topic, nodes*each, 15*time.Second)
			got := recs[n].Get(topic)
			if err := recs[n].CheckOrder(topic); err != nil || len(got) != nodes*each || got[0].Offset != 1 {
				t.Fatalf("node %d received %d publications of %s from offset %d, want %d from 1 in order: %v", n+1, len(got), topic, got[0].Offset, nodes*each, err)
			}
			for i := 1; i < each; i++ {
				if a, b := acks[n][ti][i-1], acks[n][ti][i]; b.Offset <= a.Offset || b.Epoch != a.Epoch {
					t.Fatalf("node %d's publications to %s acknowledged as %d then %d", n+1, topic, a.Offset, b.Offset)
				}
			}
		}
	}
	t.Logf("declined %v times", counter(t, reg, "rtlab_broker_sequencer_declined_total"))
}

// shardTopics returns per topics on each of shards shards.
func shardTopics(shards, per int) []string {
	var topics []string
	count := make([]int, shards)
	for i := 0; len(topics) < shards*per; i++ {
		topic := fmt.Sprintf("spread/%d", i)
		if s := shard.Index(topic, shards); count[s] < per {
			count[s]++
			topics = append(topics, topic)
		}
	}
	return topics
}

// spreadNode starts node n over the first shards vhosts of srv, as rtlab serve does with
// several URLs: one Roles for its shards, metrics labelled node and shard.
func spreadNode(tb testing.TB, srv *brokertest.Server, ns string, shards, n int, reg prometheus.Registerer) (*shard.Broker, *brokertest.Recorder) {
	tb.Helper()
	roles := amqp.NewRoles(shards)
	var bs []hub.Broker
	for i := 1; i <= shards; i++ {
		labels := prometheus.Labels{"node": strconv.Itoa(n), "shard": strconv.Itoa(i)}
		b, err := amqp.New(context.Background(), srv.VhostURL(i), amqp.Config{Name: ns, MaxBytes: 64 << 20, Direct: direct.Direct, Roles: roles,
			Logger: brokertest.Logger(), Registerer: prometheus.WrapRegistererWith(labels, reg)})
		if err != nil {
			tb.Fatal(err)
		}
		bs = append(bs, b)
	}
	sb, err := shard.New(bs)
	if err != nil {
		tb.Fatal(err)
	}
	rec := brokertest.NewRecorder()
	if err := sb.Run(context.Background(), rec); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	return sb, rec
}

// checkSpread checks that each shard has one sequencer and each node is the sequencer of at most
// ceil(shards/nodes) of them.
func checkSpread(tb testing.TB, reg *prometheus.Registry, shards, nodes int) {
	tb.Helper()
	perNode := map[string]int{}
	perShard := map[string]int{}
	for _, m := range named(tb, reg, "rtlab_broker_sequencer") {
		if m.GetGauge().GetValue() != 1 {
			continue
		}
		var node, sh string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "node":
				node = l.GetValue()
			case "shard":
				sh = l.GetValue()
			}
		}
		perNode[node]++
		perShard[sh]++
	}
	tb.Logf("sequencers per node %v, per shard %v", perNode, perShard)
	share := (shards + nodes - 1) / nodes
	for n, k := range perNode {
		if k > share {
			tb.Errorf("node %s is the sequencer of %d shards, want at most %d", n, k, share)
		}
	}
	for i := 1; i <= shards; i++ {
		if k := perShard[strconv.Itoa(i)]; k != 1 {
			tb.Errorf("shard %d has %d sequencers, want 1", i, k)
		}
	}
}

// TestSequencerComesBack: two nodes that both hold their share already (as if they ordered
// other shards) decline the sequencer queue in turn; it comes back to the first within the
// decline window, which then takes it. The requests handed back in between are all assigned,
// in order, none twice.
func TestSequencerComesBack(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	reg := prometheus.NewRegistry()
	ns := brokertest.Namespace()
	var nodes [2]hub.Broker
	recs := [2]*brokertest.Recorder{brokertest.NewRecorder(), brokertest.NewRecorder()}
	for i := range nodes {
		roles := amqp.NewRoles(2)
		roles.Force() // one of two shards held: the share of two nodes
		b, err := amqp.New(context.Background(), srv.URL, amqp.Config{Name: ns, MaxBytes: 64 << 20, Roles: roles, Logger: brokertest.Logger(),
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"node": strconv.Itoa(i + 1)}, reg)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Run(context.Background(), recs[i]); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		nodes[i] = b
	}
	const topic, each = "back/a", 50
	for i := range nodes {
		if err := nodes[i].Subscribe(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if _, err := nodes[i].Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"j":%d}`, i, j))}); err != nil {
					t.Errorf("node %d publish %d: %v", i+1, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if d := counter(t, reg, "rtlab_broker_sequencer_declined_total"); d != 2 {
		t.Errorf("declined %v times, want 2 (each node once)", d)
	}
	if a, b := gauge(t, reg, "rtlab_broker_sequencer", "1"), gauge(t, reg, "rtlab_broker_sequencer", "2"); a+b != 1 {
		t.Errorf("sequencer gauges %v and %v, want one sequencer", a, b)
	}
	for i, rec := range recs {
		rec.WaitCount(t, topic, 2*each, 10*time.Second)
		got := rec.Get(topic)
		if err := rec.CheckOrder(topic); err != nil || len(got) != 2*each || got[0].Offset != 1 {
			t.Fatalf("node %d received %d publications from offset %d, want %d from 1 in order: %v", i+1, len(got), got[0].Offset, 2*each, err)
		}
	}
}

// TestSequencerHandOver: a node alone over two vhost shards orders both; a second node starts
// while both publish to topics of both shards, and the first hands one shard's role over to
// it. Every publication is acknowledged, once, and every node receives every topic in order
// with consecutive offsets from 1.
func TestSequencerHandOver(t *testing.T) {
	const shards, each = 2, 150
	srv := brokertest.StartRabbitVhosts(t, shards)
	reg := prometheus.NewRegistry()
	ns := brokertest.Namespace()
	topics := shardTopics(shards, 2)
	a, recA := spreadNode(t, srv, ns, shards, 1, reg)
	for _, topic := range topics {
		if err := a.Subscribe(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
	checkSpread(t, reg, shards, 1) // a node alone orders both
	b, recB := spreadNode(t, srv, ns, shards, 2, reg)
	for _, topic := range topics {
		if err := b.Subscribe(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
	// Publish for longer than a balance check takes to notice the second node.
	var wg sync.WaitGroup
	for _, n := range []*shard.Broker{a, b} {
		for _, topic := range topics {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last uint64
				for i := range each {
					p, err := n.Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
					if err != nil {
						t.Errorf("publish %s #%d: %v", topic, i, err)
						return
					}
					if p.Offset <= last {
						t.Errorf("%s #%d acknowledged at offset %d after %d", topic, i, p.Offset, last)
					}
					last = p.Offset
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	if h := counter(t, reg, "rtlab_broker_sequencer_handovers_total"); h != 1 {
		t.Errorf("%v roles handed over, want 1", h)
	}
	checkSpread(t, reg, shards, 2)
	for i, rec := range []*brokertest.Recorder{recA, recB} {
		for _, topic := range topics {
			rec.WaitCount(t, topic, 2*each, 15*time.Second)
			got := rec.Get(topic)
			if err := rec.CheckOrder(topic); err != nil || len(got) != 2*each || got[0].Offset != 1 || got[len(got)-1].Offset != 2*each {
				t.Fatalf("node %d received %d publications of %s from offset %d, want %d from 1 in order: %v", i+1, len(got), topic, got[0].Offset, 2*each, err)
			}
		}
	}

	// The second node goes: the first takes the role it handed over back, and goes on.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		p, err := a.Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{"after":1}`)})
		if err != nil || p.Offset != 2*each+1 {
			t.Fatalf("publish to %s after the second node went: %+v, %v; want offset %d", topic, p, err, 2*each+1)
		}
		if hr, err := a.History(context.Background(), topic, 0, 0); err != nil || hr.Top.Offset != 2*each+1 {
			t.Fatalf("history of %s after the second node went: top %+v, %v", topic, hr.Top, err)
		}
	}
	checkSpread(t, reg, shards, 1)
}
