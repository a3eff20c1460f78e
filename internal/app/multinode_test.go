package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestMultiNode runs two rtlab nodes on one external broker (as two `rtlab serve --broker URL`
// would) with clients of every transport on both, over real sockets:
//
//   - ordering: publishers on both nodes at once; every client on either node receives every
//     publication exactly once, offsets 1..N in one epoch;
//   - broker restart: /readyz goes 503 then 200 on both nodes, publishes in between are
//     refused with 503, and clients end up with every acknowledged publication exactly once in
//     order; where the broker lost its data (Redis without persistence), they see a new epoch;
//   - node dies: the clients of a node that shuts down resume on the other with no loss and no
//     duplicates.
//
// Each broker's server is started once and shared by its three subtests (RabbitMQ takes ~5 s
// to boot). A missing server binary skips the broker, or fails with RTLAB_REQUIRE_BROKERS set.
func TestMultiNode(t *testing.T) {
	for _, bk := range []struct {
		name    string
		start   func(testing.TB) *brokertest.Server
		durable bool // history survives a server restart
		relayed bool // a relay in front of the server's address cuts a node off (not a cluster's: nodes dial every master)
	}{
		{"redis", brokertest.StartRedis, false, true},
		{"redis-shards", func(tb testing.TB) *brokertest.Server { return brokertest.StartRedisShards(tb, 3) }, false, true},
		{"redis-cluster", brokertest.StartRedisCluster, false, false},
		{"nats", brokertest.StartNATS, true, true},
		{"amqp", brokertest.StartRabbit, true, true},
	} {
		t.Run(bk.name, func(t *testing.T) {
			srv := bk.start(t)
			nodes := []*testServer{startNode(t, srv.URL), startNode(t, srv.URL)}
			t.Run("Ordering", func(t *testing.T) { testMultiNodeOrdering(t, nodes) })
			t.Run("BrokerRestart", func(t *testing.T) { testMultiNodeBrokerRestart(t, srv, nodes, bk.durable) })
			if bk.relayed {
				t.Run("NodeCutOff", func(t *testing.T) { testMultiNodeCutOff(t, srv, nodes) })
			}
			t.Run("NodeDies", func(t *testing.T) { testMultiNodeNodeDies(t, nodes) })
		})
	}
}

// startNode starts an App on brokerURL as `rtlab serve --broker brokerURL` does, with history
// large enough that no test publication falls out of it.
func startNode(t *testing.T, brokerURL string) *testServer {
	t.Helper()
	return startServer(t, func(c *Config) {
		c.Broker = brokerURL
		c.AMQPDirect = "127.0.0.1:0" // rtlab serve's default
		c.HistorySize = 5000
		c.Logger = brokertest.Logger()
	})
}

func testMultiNodeOrdering(t *testing.T, nodes []*testServer) {
	const topic, per = "multi/order", 40
	fs := followAll(t, topic, nodes, tt.Position{})
	var (
		wg   sync.WaitGroup
		acks = &acked{}
	)
	for i, n := range nodes {
		wg.Add(4)
		for k := range 2 {
			go func() {
				defer wg.Done()
				for j := range per {
					pos, code, err := publishHTTP(n, topic, fmt.Sprintf(`{"n":%d,"http":%d,"j":%d}`, i, k, j))
					if err != nil || code != 200 {
						t.Errorf("node %d: publish: %d %v", i, code, err)
						return
					}
					acks.add(pos)
				}
			}()
		}
		go func() { defer wg.Done(); acks.addAll(publishWS(t, n, topic, per)) }()
		go func() { defer wg.Done(); acks.addAll(publishSTOMP(t, n, topic, per)) }()
	}
	wg.Wait()
	const total = 2 * 4 * per
	top := agreedTop(t, topic, nodes)
	if top.Offset != total {
		t.Fatalf("top is %d, want %d", top.Offset, total)
	}
	awaitAll(t, fs, top)
	acks.checkUnique(t, top)
	for _, f := range fs {
		f.checkExactly(t, top, acks.list())
	}
}

func testMultiNodeBrokerRestart(t *testing.T, srv *brokertest.Server, nodes []*testServer, durable bool) {
	const topic = "multi/restart"
	fs := followAll(t, topic, nodes, tt.Position{})
	pubs := startPublishers(t, topic, nodes)
	pubs.await(t, 20, "publications before the restart")
	first := agreedTop(t, topic, nodes)

	srv.Stop()
	stopped := time.Now()
	for i, n := range nodes {
		eventually.True(t, 30*time.Second, fmt.Sprintf("node %d not ready", i), func() bool { return readyz(n) == 503 })
	}
	for i, n := range nodes {
		checkPublishRefused(t, n, topic, fmt.Sprintf("node %d during the outage", i))
	}
	srv.Start()
	started := time.Now()
	for i, n := range nodes {
		eventually.True(t, 30*time.Second, fmt.Sprintf("node %d ready again", i), func() bool { return readyz(n) == 200 })
	}
	t.Logf("broker down for %v; both nodes ready %v after it restarted", started.Sub(stopped).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	before := pubs.count()
	pubs.await(t, before+10, "publications after the restart")
	// Clients that were away during the outage come back with the position they had before it.
	late := followAll(t, topic, nodes, first)
	pubs.await(t, before+20, "publications after the restart")
	// Refusals during the outage are checked above on every transport; the background
	// publishers may not try at all while a Redis restart lasts 60 ms.
	pubs.stop(t)
	t.Logf("background publishes refused during the outage: %d", pubs.refused())
	top := agreedTop(t, topic, nodes)
	awaitAll(t, append(fs, late...), top)
	acks := pubs.acks.list()
	if durable {
		if top.Epoch != first.Epoch {
			t.Fatalf("epoch changed from %s to %s across a restart of a durable broker", first.Epoch, top.Epoch)
		}
		pubs.acks.checkUnique(t, top)
		for _, f := range append(fs, late...) {
			f.checkExactly(t, top, acks)
		}
		return
	}
	if top.Epoch == first.Epoch {
		t.Fatalf("epoch %s kept across a restart of a Redis without persistence", top.Epoch)
	}
	for _, f := range fs {
		f.checkNewEpoch(t, first.Epoch, top, acks)
	}
	for _, f := range late {
		f.checkToldNewEpoch(t, top)
	}
}

// testMultiNodeCutOff: a third node loses its broker connection (a relay between them is cut)
// right after its clients subscribed, before anything was delivered to it, while the other
// nodes keep publishing. Its clients, on every transport, must get every publication, in order
// and once, when it is back: what was published meanwhile first, fetched from history.
func testMultiNodeCutOff(t *testing.T, srv *brokertest.Server, nodes []*testServer) {
	const topic = "multi/cutoff"
	relay := brokertest.StartRelay(t, srv.Addr)
	cut := startNode(t, strings.Replace(srv.URL, srv.Addr, relay.Addr, 1))
	fs := followAll(t, topic, []*testServer{cut}, tt.Position{})
	relay.Cut()
	eventually.True(t, 30*time.Second, "cut-off node not ready", func() bool { return readyz(cut) == 503 })
	pubs := startPublishers(t, topic, nodes)
	pubs.await(t, 20, "publications while the node is cut off")
	relay.Heal()
	eventually.True(t, 30*time.Second, "cut-off node ready again", func() bool { return readyz(cut) == 200 })
	pubs.await(t, pubs.count()+10, "publications after it returned")
	pubs.stop(t)
	top := agreedTop(t, topic, append([]*testServer{cut}, nodes...))
	awaitAll(t, fs, top)
	pubs.acks.checkUnique(t, top)
	for _, f := range fs {
		f.checkExactly(t, top, pubs.acks.list())
	}
}

// TestCutOffNodeToldOfTrimmedHistory: a node is cut off from Redis while the other node
// publishes more than the topic's history holds. When it is back, its clients on every
// transport are told that publications are gone, then get every retained one and what follows,
// in order: never the retained ones alone, as if nothing had been missed.
func TestCutOffNodeToldOfTrimmedHistory(t *testing.T) {
	srv := brokertest.StartRedis(t)
	relay := brokertest.StartRelay(t, srv.Addr)
	node := func(url string) *testServer {
		return startServer(t, func(c *Config) {
			c.Broker = url
			c.HistorySize = 5
			c.Logger = brokertest.Logger()
		})
	}
	const topic = "multi/trimmed"
	publisher := node(srv.URL)
	cut := node(strings.Replace(srv.URL, srv.Addr, relay.Addr, 1))
	fs := followAll(t, topic, []*testServer{cut}, tt.Position{})
	publish := func() tt.Position {
		t.Helper()
		pos, code, err := publishHTTP(publisher, topic, `{"n":1}`)
		if err != nil || code != 200 {
			t.Fatalf("publish: %d %v", code, err)
		}
		return pos
	}
	first := publish()
	for _, f := range fs {
		eventually.True(t, 10*time.Second, f.name+" received the first publication", func() bool { return f.reached(first) })
	}
	relay.Cut()
	eventually.True(t, 30*time.Second, "cut-off node not ready", func() bool { return readyz(cut) == 503 })
	for range 20 {
		publish()
	}
	relay.Heal()
	eventually.True(t, 30*time.Second, "cut-off node ready again", func() bool { return readyz(cut) == 200 })
	top := publish()
	awaitAll(t, fs, top)
	for _, f := range fs {
		f.mu.Lock()
		got, told := append([]tt.Position(nil), f.got...), append([]string(nil), f.told...)
		f.mu.Unlock()
		if len(told) == 0 {
			t.Errorf("%s was not told that publications are gone; received %v", f.name, got)
			continue
		}
		// The first one arrived before the cut; after it, what history held when the node
		// filled its gap, then what followed, up to the last one. Whether the last one was
		// already published when the node filled decides where that starts: 17 (the last 5
		// of the 20, then the last one) or 18 (the last 5 including it).
		from := top.Offset - 5
		if len(got) > 1 && got[1].Offset == from+1 {
			from++
		}
		want := []tt.Position{first}
		for o := from; o <= top.Offset; o++ {
			want = append(want, tt.Position{Offset: o, Epoch: top.Epoch})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s received %v, want %v (told: %q)", f.name, got, want, told)
		}
		if gone := fmt.Sprintf("publications %d to %d ", first.Offset+1, from-1); !strings.Contains(told[0], gone) {
			t.Errorf("%s was told %q, want it to say %q", f.name, told[0], gone)
		}
	}
}

func testMultiNodeNodeDies(t *testing.T, nodes []*testServer) {
	const topic = "multi/failover"
	fs := followAll(t, topic, nodes, tt.Position{})
	pubs := startPublishers(t, topic, nodes)
	pubs.await(t, 20, "publications before the node dies")

	dead, alive := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dead.app.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	dead.Close()
	before := pubs.count()
	pubs.await(t, before+20, "publications after the node died")
	for _, f := range fs[:len(fs)/2] {
		eventually.True(t, 20*time.Second, f.name+" moved to the other node", func() bool { return f.on() == alive })
		t.Logf("%s: %s", f.name, f.summary())
	}
	pubs.stop(t)
	top := agreedTop(t, topic, []*testServer{alive})
	awaitAll(t, fs, top)
	pubs.acks.checkUnique(t, top)
	for _, f := range fs {
		f.checkExactly(t, top, pubs.acks.list())
	}
}

// readyz returns the status of GET /readyz (0 when the node does not answer).
func readyz(n *testServer) int {
	resp, err := http.Get(n.URL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// agreedTop waits until every node reports the same position for topic, and returns it.
func agreedTop(t *testing.T, topic string, nodes []*testServer) tt.Position {
	t.Helper()
	var tops []tt.Position
	eventually.True(t, 10*time.Second, "nodes agreeing on the position of "+topic, func() bool {
		tops = tops[:0]
		for _, n := range nodes {
			var ans tt.PollAnswer
			if n.get(t, "/api/poll/"+topic, &ans) != 200 {
				return false
			}
			tops = append(tops, tt.Position{Offset: ans.Offset, Epoch: ans.Epoch})
		}
		for _, p := range tops {
			if p != tops[0] {
				return false
			}
		}
		return true
	})
	return tops[0]
}

// publishHTTP publishes data to topic on node over HTTP and returns the status. err is set
// when the node did not answer at all.
func publishHTTP(n *testServer, topic, data string) (tt.Position, int, error) {
	pos, err := tt.PublishHTTP(context.Background(), http.DefaultClient, tt.Dialer{}, n.URL, topic, data)
	var r *tt.Refusal
	switch {
	case err == nil:
		return pos, http.StatusOK, nil
	case errors.As(err, &r):
		return pos, r.Status, nil
	}
	return pos, 0, err
}

// publishWS publishes n times over one WebSocket, all at once, and returns the acknowledged
// positions.
func publishWS(t *testing.T, node *testServer, topic string, n int) []tt.Position {
	c, err := tt.Dialer{}.TryWS(context.Background(), node.ws("/api/ws"))
	if err != nil {
		t.Errorf("ws publisher: %v", err)
		return nil
	}
	defer c.Close()
	for j := range n {
		if err := c.Write(fmt.Sprintf(`{"op":"publish","topic":%q,"id":%d,"data":{"ws":%d}}`, topic, j, j)); err != nil {
			t.Errorf("ws publisher: %v", err)
			return nil
		}
	}
	var out []tt.Position
	for len(out) < n {
		b, err := c.Next(10 * time.Second)
		if err != nil {
			t.Errorf("ws publisher: %v", err)
			return out
		}
		var m tt.Msg
		_ = json.Unmarshal(b, &m)
		switch m.Op {
		case "ack":
			out = append(out, m.Pos())
		case "error":
			t.Errorf("ws publisher: %s %s", m.Code, m.Reason)
			return out
		}
	}
	return out
}

// publishSTOMP sends n times with receipts over one STOMP session, all at once, and returns the
// positions the receipts carry.
func publishSTOMP(t *testing.T, node *testServer, topic string, n int) []tt.Position {
	c, err := tt.Dialer{Protocols: []string{"v12.stomp"}}.TryWS(context.Background(), node.ws("/api/stomp"))
	if err != nil {
		t.Errorf("stomp publisher: %v", err)
		return nil
	}
	defer c.Close()
	var b strings.Builder
	b.WriteString("CONNECT\naccept-version:1.2\n\n\x00")
	for j := range n {
		fmt.Fprintf(&b, "SEND\ndestination:/topic/%s\nreceipt:%d\n\n{\"stomp\":%d}\x00", topic, j, j)
	}
	if err := c.Write(b.String()); err != nil {
		t.Errorf("stomp publisher: %v", err)
		return nil
	}
	st := tt.AsSTOMP(c)
	var out []tt.Position
	for len(out) < n {
		f, err := st.NextFrame(10 * time.Second)
		if err != nil {
			t.Errorf("stomp publisher: %v", err)
			return out
		}
		switch f.Command {
		case "RECEIPT":
			out = append(out, tt.FramePublication(f).Pos())
		case "ERROR":
			t.Errorf("stomp publisher: ERROR %s", tt.Header(f, "message"))
			return out
		}
	}
	return out
}

// checkPublishRefused publishes over HTTP, WebSocket and STOMP and expects each to be refused
// as unavailable: HTTP 503, a WebSocket error, a STOMP ERROR.
func checkPublishRefused(t *testing.T, n *testServer, topic, what string) {
	t.Helper()
	var ans struct{ Error, Reason string }
	if code := n.post(t, "/api/publish/"+topic, `{"outage":true}`, &ans); code != 503 || ans.Error != "unavailable" {
		t.Errorf("%s: POST /api/publish/%s answered %d %+v, want 503 unavailable", what, topic, code, ans)
	}
	c := tt.DialWS(t, n.ws("/api/ws"))
	c.Op("connected")
	c.Send(`{"op":"publish","topic":"` + topic + `","id":1,"data":{"outage":true}}`)
	if m := c.Msg(); m.Op != "error" || m.Code != "unavailable" {
		t.Errorf("%s: WebSocket publish answered %+v, want an error with code unavailable", what, m)
	}
	st := tt.DialSTOMP(t, n.ws("/api/stomp"))
	st.Send("CONNECT\naccept-version:1.2\n\n\x00SEND\ndestination:/topic/" + topic + "\nreceipt:1\n\n{\"outage\":true}\x00")
	st.Expect("CONNECTED")
	// The SEND alone is refused; the session goes on (docs/protocol.md).
	if f := st.Frame(10 * time.Second); f.Command != "RECEIPT" || tt.Header(f, "refused") != "unavailable" {
		t.Errorf("%s: STOMP SEND answered %s %v, want a RECEIPT refused:unavailable", what, f.Command, f)
	}
}

// acked collects acknowledged positions from several publishers.
type acked struct {
	mu  sync.Mutex
	pos []tt.Position // guarded by mu
}

func (a *acked) add(p tt.Position) {
	a.mu.Lock()
	a.pos = append(a.pos, p)
	a.mu.Unlock()
}

func (a *acked) addAll(ps []tt.Position) {
	for _, p := range ps {
		a.add(p)
	}
}

func (a *acked) list() []tt.Position {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]tt.Position(nil), a.pos...)
}

// checkUnique checks that no two publishes were acknowledged with the same position, and that
// all are within top's epoch and offset.
func (a *acked) checkUnique(t *testing.T, top tt.Position) {
	t.Helper()
	seen := make(map[tt.Position]bool)
	for _, p := range a.list() {
		if seen[p] {
			t.Errorf("two publishes acknowledged at %v", p)
		}
		seen[p] = true
		if p.Epoch != top.Epoch || p.Offset == 0 || p.Offset > top.Offset {
			t.Errorf("acknowledged %v, outside the topic's %v", p, top)
		}
	}
}

// publishers publish over HTTP on every node until stopped: one per node, each on its own node
// only, stopping when its node no longer answers.
type publishers struct {
	acks     acked
	mu       sync.Mutex
	failures []string // answers other than 200, 503 and 504; guarded by mu
	n503     int      // guarded by mu
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startPublishers(t *testing.T, topic string, nodes []*testServer) *publishers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &publishers{cancel: cancel}
	for i, n := range nodes {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				pos, code, err := publishHTTP(n, topic, fmt.Sprintf(`{"node":%d,"j":%d}`, i, j))
				switch {
				case err != nil && code == 0:
					return // the node is gone
				case code == 200 && err == nil:
					p.acks.add(pos)
				case code == 503 || code == 504: // not published, or sent with no answer (it may be)
					p.mu.Lock()
					p.n503++
					p.mu.Unlock()
				default:
					p.mu.Lock()
					p.failures = append(p.failures, fmt.Sprintf("node %d: %d %v", i, code, err))
					p.mu.Unlock()
				}
				// A steady pace keeps the topic within history however long an outage lasts.
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *publishers) count() int { return len(p.acks.list()) }

func (p *publishers) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n503
}

func (p *publishers) await(t *testing.T, n int, what string) {
	t.Helper()
	eventually.True(t, 30*time.Second, fmt.Sprintf("%d %s", n, what), func() bool { return p.count() >= n })
}

// stop stops publishing and fails the test if any publish got an answer other than 200, 503 or 504.
func (p *publishers) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.failures {
		t.Errorf("publish: %s", f)
	}
	p.failures = nil
}

// follower follows a topic after a position (from the first publication when from is zero)
// with a client of one transport, which resumes after the server closes it, as a real client
// would: on the same node, or, when that node refuses or is gone, on the next. It records what
// the client was told.
type follower struct {
	name  string
	from  tt.Position
	nodes map[string]*testServer // by base URL
	c     tt.Client
	stop  func() // closes the client and waits for the recording to end

	mu          sync.Mutex
	got         []tt.Position // every publication received, in order of arrival; guarded by mu
	told        []string      // what the client was told about lost history; guarded by mu
	toldSince   bool          // told since the last publication; guarded by mu
	unannounced []string      // epoch changes nobody told the client about; guarded by mu
	node        *testServer   // the node of the current session; guarded by mu
	sessions    int           // sessions that subscribed; guarded by mu
	ended       []string      // why sessions ended; guarded by mu
}

// followAll starts a follower of each transport on each node, from position from, and waits
// until all subscribed.
func followAll(t *testing.T, topic string, nodes []*testServer, from tt.Position) []*follower {
	t.Helper()
	byURL := make(map[string]*testServer, len(nodes))
	for _, n := range nodes {
		byURL[n.URL] = n
	}
	var fs []*follower
	for i := range nodes {
		var order []string // the node's own first
		for _, n := range append(append([]*testServer(nil), nodes[i:]...), nodes[:i]...) {
			order = append(order, n.URL)
		}
		for _, kind := range tt.Kinds {
			f := &follower{name: fmt.Sprintf("%s@node%d", kind, i), from: from, nodes: byURL,
				c: tt.New(t, kind, tt.Options{Nodes: order})}
			if from.Epoch != "" {
				f.name += fmt.Sprintf("(from %v)", from)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go f.record(ctx, done)
			f.stop = func() { cancel(); <-done; f.c.Close() }
			t.Cleanup(f.stop)
			since := from
			f.c.Subscribe(topic, &since)
			fs = append(fs, f)
		}
	}
	for _, f := range fs {
		eventually.True(t, 10*time.Second, f.name+" subscribed", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.sessions > 0
		})
	}
	return fs
}

// record keeps what f's client is told until ctx ends.
func (f *follower) record(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-f.c.Events():
			f.mu.Lock()
			switch {
			case e.Kind == tt.Message:
				p := e.Pos()
				if n := len(f.got); n > 0 && f.got[n-1].Epoch != p.Epoch && !f.toldSince {
					f.unannounced = append(f.unannounced, fmt.Sprintf("%v -> %v", f.got[n-1], p))
				}
				f.got = append(f.got, p)
				f.toldSince = false
			case e.Kind == tt.Gap:
				f.told = append(f.told, "gap: "+e.Reason)
				f.toldSince = true
			case e.Up:
				f.sessions++
				f.node = f.nodes[e.Node]
			default:
				f.ended = append(f.ended, e.Node+": "+e.Reason)
			}
			f.mu.Unlock()
		}
	}
}

// awaitAll waits until every follower has received top.
func awaitAll(t *testing.T, fs []*follower, top tt.Position) {
	t.Helper()
	for _, f := range fs {
		ok := eventually.Within(20*time.Second, func() bool { return f.reached(top) })
		f.stop()
		if !ok {
			t.Errorf("%s did not receive %v: %s", f.name, top, f.summary())
		}
	}
}

// reached reports whether the last publication f received is pos.
func (f *follower) reached(pos tt.Position) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got) > 0 && f.got[len(f.got)-1] == pos
}

func (f *follower) on() *testServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node
}

func (f *follower) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last []tt.Position
	if n := len(f.got); n > 5 {
		last = f.got[n-5:]
	} else {
		last = f.got
	}
	return fmt.Sprintf("%d received (last %v), %d sessions (ended: %q), told %q", len(f.got), last, f.sessions, f.ended, f.told)
}

// checkExactly checks that the follower received from+1..top in top's epoch exactly once, in
// order, including every acknowledged publication after from, and was never told of lost
// history.
func (f *follower) checkExactly(t *testing.T, top tt.Position, acks []tt.Position) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.told) > 0 {
		t.Errorf("%s was told history is lost: %q", f.name, f.told)
	}
	base := f.from.Offset
	for i, p := range f.got {
		if want := (tt.Position{Offset: base + uint64(i+1), Epoch: top.Epoch}); p != want {
			t.Errorf("%s: publication %d is %v, want %v (%d sessions, ended: %q)", f.name, i, p, want, f.sessions, f.ended)
			return
		}
	}
	if base+uint64(len(f.got)) != top.Offset {
		t.Errorf("%s received %d publications, want %d", f.name, len(f.got), top.Offset-base)
	}
	for _, a := range acks {
		if a.Epoch != top.Epoch || a.Offset > top.Offset {
			t.Errorf("%s lacks acknowledged %v", f.name, a)
		}
	}
}

// checkToldNewEpoch checks a follower that resumed from a position whose history is gone: it was
// told so plainly, then received the new epoch 1..top exactly once, in order.
func (f *follower) checkToldNewEpoch(t *testing.T, top tt.Position) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.told) == 0 {
		t.Errorf("%s resumed from a lost epoch without being told (received %v...)", f.name, f.got[:min(len(f.got), 3)])
	}
	for i, p := range f.got {
		if want := (tt.Position{Offset: uint64(i + 1), Epoch: top.Epoch}); p != want {
			t.Errorf("%s: publication %d is %v, want %v", f.name, i, p, want)
			return
		}
	}
	if uint64(len(f.got)) != top.Offset {
		t.Errorf("%s received %d publications, want %d", f.name, len(f.got), top.Offset)
	}
}

// checkNewEpoch checks a follower across a broker restart that lost the topic's history: it
// received the old epoch's publications in order, then saw the epoch change, then received
// the new epoch 1..top exactly once, including every publication acknowledged in it.
func (f *follower) checkNewEpoch(t *testing.T, old string, top tt.Position, acks []tt.Position) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	i := 0
	for ; i < len(f.got) && f.got[i].Epoch == old; i++ {
		if f.got[i].Offset != uint64(i+1) {
			t.Errorf("%s: publication %d of the old epoch is %v", f.name, i, f.got[i])
			return
		}
	}
	oldSeen := uint64(i)
	for j, p := range f.got[i:] {
		if want := (tt.Position{Offset: uint64(j + 1), Epoch: top.Epoch}); p != want {
			t.Errorf("%s: publication %d of the new epoch is %v, want %v (told %q)", f.name, j, p, want, f.told)
			return
		}
	}
	if n := uint64(len(f.got) - i); n != top.Offset {
		t.Errorf("%s received %d publications of the new epoch, want %d", f.name, n, top.Offset)
	}
	lost := 0
	for _, a := range acks {
		switch {
		case a.Epoch == old && a.Offset > oldSeen:
			lost++
		case a.Epoch != old && a.Epoch != top.Epoch:
			t.Errorf("acknowledged %v, in neither the old epoch %s nor the new %s", a, old, top.Epoch)
		}
	}
	// Every client must be told of the change before the new epoch's publications.
	if len(f.unannounced) > 0 {
		t.Errorf("%s: epoch changed without being told: %q", f.name, f.unannounced)
	}
	t.Logf("%s: %d of the old epoch, then %d of the new; told %q; unannounced epoch changes %q; %d acknowledged in the old epoch never arrived",
		f.name, oldSeen, top.Offset, f.told, f.unannounced, lost)
}
