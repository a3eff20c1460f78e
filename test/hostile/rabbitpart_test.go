package hostile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/faultproxy"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestRabbitPartition black-holes one node's path to RabbitMQ (no FIN, no RST, nothing read:
// writes stall once the socket buffers fill) for 15 s while another node publishes, as `rtlab
// bench --fault partition-node` does. The cut-off node must log the loss and answer /readyz 503
// before the path heals, 200 after; then its subscriber, kept connected, and a client resuming
// from the offset it had before the cut, both receive every publication without a gap notice:
// history still holds them all. The cut-off node is a follower, the sequencer (the first node
// up), and a follower whose clients keep publishing large publications into the black hole, so
// that its writes stall. A bystander on the other node is served throughout (as the sequencer
// is cut off, from the moment its role moved).
func TestRabbitPartition(t *testing.T) {
	rabbit := brokertest.StartRabbitVhosts(t, 3)
	for i, c := range []partitionCase{{name: "Follower"}, {name: "Sequencer", cutFirst: true}, {name: "StalledWrites", flood: true}} {
		t.Run(c.name, func(t *testing.T) { testRabbitPartition(t, rabbit.VhostURL(i+1), rabbit.Addr, c) })
	}
}

type partitionCase struct {
	name     string
	cutFirst bool // the cut-off node is the sequencer
	flood    bool // the cut-off node's clients publish 512 KB publications during the cut
}

// partitionNodes are two nodes of one RabbitMQ, one of them behind proxy.
type partitionNodes struct {
	on, cut   *servertest.Proc
	proxy     *faultproxy.Proxy
	b         *servertest.Bystander
	bystander func() // starts b on on, once
}

func startPartitionNodes(t *testing.T, url, addr string, c partitionCase) *partitionNodes {
	t.Helper()
	proxy, err := faultproxy.StartTCP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	n := &partitionNodes{proxy: proxy}
	cutArgs := []string{"--broker", strings.Replace(url, addr, proxy.Addr(), 1)}
	if c.flood {
		cutArgs = append(cutArgs, "--max-frame", "1048576", "--http-pub-rate", "-1")
	}
	if c.cutFirst {
		n.cut = servertest.Start(t, bin, cutArgs...)
		n.cut.Await("/readyz", http.StatusOK, 60*time.Second)
	}
	n.on = servertest.Start(t, bin, "--broker", url)
	// While the cut-off node holds the sequencer's role, every publish waits on it (and is
	// answered outcome_unknown): then the bystander starts once the role has moved.
	n.bystander = func() {
		if n.b == nil {
			n.b = servertest.StartBystander(t, n.on, "news/bystander", "", 20*time.Millisecond)
		}
	}
	if !c.cutFirst {
		n.bystander()
		n.cut = servertest.Start(t, bin, cutArgs...)
	}
	for _, p := range []*servertest.Proc{n.on, n.cut} {
		p.Await("/readyz", http.StatusOK, 60*time.Second)
	}
	return n
}

func testRabbitPartition(t *testing.T, url, addr string, c partitionCase) {
	n := startPartitionNodes(t, url, addr, c)
	on, cut := n.on, n.cut
	const topic = "news/partition"
	live := tt.New(t, tt.WS, tt.Options{Nodes: []string{cut.URL()}, Dialer: tt.Dialer{From: attacker2}})
	live.Subscribe(topic, &tt.Position{})
	tt.AwaitUp(t, live)
	pub := &publisher{t: t, hc: httpFrom(attacker)}
	pub.until(on.URL(), topic)
	before := tt.Messages(t, live, 1, 30*time.Second)[0].Pos()

	n.proxy.Set(faultproxy.BlackHole)
	ready := watchReadyz(cut, time.Now())
	const blackout = 15 * time.Second
	ctx, stopFlood := context.WithTimeout(context.Background(), blackout)
	defer stopFlood()
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		if c.flood {
			flood(ctx, cut.URL(), "news/flood")
		}
	}()
	for ctx.Err() == nil {
		if pub.once(on.URL(), topic) == nil { // paced: each answered before the next
			n.bystander()
		}
		time.Sleep(200 * time.Millisecond)
	}
	<-flooded
	lost, ok := ready.lost()
	if !ok {
		t.Fatalf("the cut-off node answered /readyz 200 through a %v black hole", blackout)
	}
	t.Logf("the cut-off node answered /readyz 503 %v after the cut; it logged: %s", lost.Round(10*time.Millisecond), lossLine(cut.Output()))
	n.proxy.Set(faultproxy.Pass)
	healed := time.Now()
	cut.Await("/readyz", http.StatusOK, 90*time.Second)
	t.Logf("ready again %v after the heal", time.Since(healed).Round(10*time.Millisecond))
	n.bystander() // if no publish was answered during the cut
	if lossLine(cut.Output()) == "" {
		t.Fatalf("the cut-off node did not log the loss:\n%s", cut.Output())
	}
	for range 5 {
		pub.until(on.URL(), topic)
		pub.until(cut.URL(), topic)
	}

	want := pub.positions()
	expectAll(t, "the subscriber kept through the partition", live, want[1:])
	resumed := tt.New(t, tt.SSE, tt.Options{Nodes: []string{cut.URL()}, Dialer: tt.Dialer{From: attacker2}})
	resumed.Subscribe(topic, &before)
	expectAll(t, "a client resuming from "+before.String(), resumed, want[1:])
	check(t, n.b, 5)
}

// lossLine is the first line of out that logs a lost broker connection.
func lossLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "connection lost") {
			return line
		}
	}
	return ""
}

// flood has 8 clients publish 512 KB publications to topic on the node at base until ctx ends,
// each waiting for its answer (refusals pause it briefly): more than the socket buffers of a
// path that takes nothing hold (the node's send queue to the proxy fills, near 4 MB here).
func flood(ctx context.Context, base, topic string) {
	data := string(padded(512<<10, `"flood":1`))
	hc := httpFrom("127.0.0.4")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := tt.PublishHTTP(ctx, hc, tt.Dialer{From: "127.0.0.4"}, base, topic, data); err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// publisher publishes over HTTP and keeps the positions acknowledged.
type publisher struct {
	t  *testing.T
	hc *http.Client

	mu    sync.Mutex
	acked []tt.Position
}

// once publishes one publication to topic on the node at base; a refusal is fine.
func (p *publisher) once(base, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := len(p.positions())
	pos, err := tt.PublishHTTP(ctx, p.hc, tt.Dialer{From: attacker}, base, topic, fmt.Sprintf(`{"n":%d}`, n))
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.acked = append(p.acked, pos)
	p.mu.Unlock()
	return nil
}

// until publishes one publication, retrying until it is acknowledged.
func (p *publisher) until(base, topic string) {
	p.t.Helper()
	eventually.Nil(p.t, 60*time.Second, func() error {
		err := p.once(base, topic)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
		}
		return err
	})
}

func (p *publisher) positions() []tt.Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]tt.Position(nil), p.acked...)
}

// expectAll reads c's publications until it has every one of want, in order, and fails on a
// gap notice. A publish answered 503 or timed out may still have been published: c may receive
// more than want, but offsets must follow each other in one epoch.
func expectAll(t *testing.T, who string, c tt.Client, want []tt.Position) {
	t.Helper()
	last := want[len(want)-1]
	var prev tt.Position
	tt.Await(t, c, 90*time.Second, fmt.Sprintf("publication %v", last), func(e tt.Event) bool {
		switch {
		case e.Kind == tt.Gap:
			t.Fatalf("%s: told of a gap though history holds every publication: %v", who, e)
		case e.Kind != tt.Message:
			return false
		case prev.Epoch != "" && (e.Epoch != prev.Epoch || e.Offset != prev.Offset+1):
			t.Fatalf("%s: received %v after %v", who, e.Pos(), prev)
		}
		prev = e.Pos()
		for len(want) > 0 && want[0].Epoch == prev.Epoch && want[0].Offset <= prev.Offset {
			want = want[1:]
		}
		return len(want) == 0
	})
}

// readyzWatch polls a node's /readyz from a moment on and notes when it first answered other
// than 200.
type readyzWatch struct {
	since time.Time
	once  sync.Once
	stop  chan struct{}
	done  chan struct{}
	took  time.Duration
}

func watchReadyz(p *servertest.Proc, since time.Time) *readyzWatch {
	w := &readyzWatch{since: since, stop: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(w.done)
		for {
			res, err := hc.Get(p.URL() + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					w.took = time.Since(since)
					return
				}
			}
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// lost stops the watch and returns how long after since /readyz first failed, if it did.
func (w *readyzWatch) lost() (time.Duration, bool) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return w.took, w.took > 0
}
