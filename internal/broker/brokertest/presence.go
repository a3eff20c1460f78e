package brokertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// presenceRefresh is the suite's presence refresh: short, so a dead node expires quickly.
const presenceRefresh = 200 * time.Millisecond

// testPresence checks presence across nodes: a client on one node is listed on every node and
// its join and leave reach watchers on every node; a node that stops cleanly takes its clients
// with it at once, and a node that dies without a word drops out after its entries expire.
// On a broker that is not Shared (memory) it checks the same on one node.
func testPresence(t *testing.T, h Harness) {
	ns := Namespace()
	const topic = "presence/room"
	a := startPresenceHub(t, h.NewNode(t, ns, hub.HistoryPolicy{}))
	b := a
	if h.Shared {
		b = startPresenceHub(t, h.NewNode(t, ns, hub.HistoryPolicy{}))
	}
	ann := a.join(t, topic, "c1", "ann", true)
	b.awaitUsers(t, topic, "node 1 before bob", "ann")
	bob := b.join(t, topic, "c2", "bob", true)
	for i, n := range []*presenceHub{a, b} {
		n.awaitUsers(t, topic, fmt.Sprintf("node %d", i), "ann", "bob")
	}
	// ann started first: she was told of bob's join; bob saw ann in his first list.
	ann.awaitEvent(t, "join bob")
	if got := bob.first(); !slices.Contains(got, "ann") {
		t.Fatalf("bob's first presence list is %v, want ann in it", got)
	}

	b.leave(bob)
	ann.awaitEvent(t, "leave bob")
	a.awaitUsers(t, topic, "node 0 after bob left", "ann")

	if !h.Shared {
		return
	}
	// A node that stops cleanly says goodbye: its clients leave at once.
	c := startPresenceHub(t, h.NewNode(t, ns, hub.HistoryPolicy{}))
	c.join(t, topic, "c3", "carol", false)
	ann.awaitEvent(t, "join carol")
	_ = c.hub.Close()
	ann.awaitEvent(t, "leave carol")

	// A node that dies (its broker connection gone, no goodbye) drops out after three
	// refreshes.
	d := startPresenceHub(t, h.NewNode(t, ns, hub.HistoryPolicy{}))
	d.join(t, topic, "c4", "dave", false)
	ann.awaitEvent(t, "join dave")
	b.awaitUsers(t, topic, "node 1 with dave", "ann", "dave")
	died := time.Now()
	_ = d.broker.Close()
	ann.awaitEvent(t, "leave dave")
	b.awaitUsers(t, topic, "node 1 after dave's node died", "ann")
	t.Logf("a dead node's client left after %v (refresh %v)", time.Since(died).Round(time.Millisecond), presenceRefresh)
}

type presenceHub struct {
	hub    *hub.Hub
	broker hub.Broker
}

func startPresenceHub(t *testing.T, b hub.Broker) *presenceHub {
	t.Helper()
	hb := hub.New(hub.Config{Broker: b, Presence: hub.PresenceConfig{Refresh: presenceRefresh}})
	ctx, cancel := context.WithCancel(context.Background())
	if err := hb.Run(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = hb.Close() })
	return &presenceHub{hub: hb, broker: b}
}

// presenceClient is a connection's subscription as presence sees it: a PresenceSink, and a
// PresenceWatcher that records what it is told.
type presenceClient struct {
	info  hub.ClientInfo
	watch bool
	sub   *hub.Subscription

	mu     sync.Mutex
	lists  [][]string // users of each presence list received
	events []string   // "join ann", "leave bob"
}

func (c *presenceClient) Deliver(*hub.Publication)     {}
func (c *presenceClient) PresenceInfo() hub.ClientInfo { return c.info }
func (c *presenceClient) WatchPresence() bool          { return c.watch }

func (c *presenceClient) Presence(_ string, cs []hub.ClientInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists = append(c.lists, users(cs))
}

func (c *presenceClient) Join(_ string, ci hub.ClientInfo) { c.event("join " + ci.User) }

func (c *presenceClient) Leave(_ string, ci hub.ClientInfo) { c.event("leave " + ci.User) }

func (c *presenceClient) event(e string) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

func (c *presenceClient) first() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lists) == 0 {
		return nil
	}
	return c.lists[0]
}

func (c *presenceClient) awaitEvent(t *testing.T, want string) {
	t.Helper()
	eventually.Nil(t, 10*time.Second, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !slices.Contains(c.events, want) {
			return notYet("%s: events %v, want %q", c.info.User, c.events, want)
		}
		return nil
	})
}

func (n *presenceHub) join(t *testing.T, topic, id, user string, watch bool) *presenceClient {
	t.Helper()
	c := &presenceClient{info: hub.ClientInfo{Client: id, User: user, Transport: "test"}, watch: watch}
	s, _, err := n.hub.Subscribe(context.Background(), topic, c, hub.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	c.sub = s
	t.Cleanup(func() { n.hub.Unsubscribe(s) })
	return c
}

func (n *presenceHub) leave(c *presenceClient) { n.hub.Unsubscribe(c.sub) }

// awaitUsers waits until n lists exactly users (sorted) on topic.
func (n *presenceHub) awaitUsers(t *testing.T, topic, who string, want ...string) {
	t.Helper()
	eventually.Nil(t, 10*time.Second, func() error {
		cs, err := n.hub.Presence(topic)
		if err != nil {
			return err
		}
		if got := users(cs); !slices.Equal(got, want) {
			return notYet("%s lists %v on %s, want %v", who, got, topic, want)
		}
		for _, c := range cs {
			if c.Node == "" || c.Joined.IsZero() {
				return fmt.Errorf("%s: entry %+v lacks its node or join time", who, c)
			}
		}
		return nil
	})
}

func users(cs []hub.ClientInfo) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.User)
	}
	slices.SortFunc(out, strings.Compare)
	return out
}
