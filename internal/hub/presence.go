package hub

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Presence: who is connected to a topic, on every node.
//
// A node keeps its own clients (subscriptions whose sink is a PresenceSink) and a copy of every
// other node's, learned over the broker (Broadcaster): each change is sent as it happens, and
// every Refresh each node sends all of its entries again. A node that has not been heard from
// for Expiry (three refreshes) is taken as dead and its entries are dropped, with a leave for
// each; so a node that dies without saying goodbye drops out. A node that stops cleanly says
// goodbye and its entries go at once. Reading presence is local: no broker round trip.
//
// Brokers that do not implement Broadcaster (memory: one node) keep presence to the node.

// ClientInfo is one client present on a topic.
type ClientInfo struct {
	Client    string    `json:"client"`              // connection id, unique on its node
	Node      string    `json:"node"`                // the node the client is connected to
	User      string    `json:"user,omitempty"`      // authenticated user; empty when anonymous
	Transport string    `json:"transport,omitempty"` // ws, stomp, sse
	Joined    time.Time `json:"joined"`
}

// PresenceSink is a Sink whose subscription counts in its topic's presence: a client's
// connection. The hub fills in Node and Joined.
type PresenceSink interface {
	Sink
	PresenceInfo() ClientInfo
}

// PresenceWatcher is a sink that is told of its topic's presence when WatchPresence is true:
// the clients present once, when its subscription starts (itself included), then every join
// and leave of another client, in order. Like Deliver, its methods must not block.
type PresenceWatcher interface {
	WatchPresence() bool
	Presence(topic string, clients []ClientInfo)
	Join(topic string, c ClientInfo)
	Leave(topic string, c ClientInfo)
}

// Broadcaster is implemented by brokers that connect several nodes. It carries small messages
// (presence, commands such as "disconnect this user") to every node. Delivery is best effort:
// what is sent while a connection is down may be lost; presence refreshes make up for that.
type Broadcaster interface {
	// Broadcast sends msg to every node sharing the broker; the sender may receive it too.
	Broadcast(ctx context.Context, msg []byte) error
	// OnBroadcast sets the function that receives the nodes' messages, in the order each node
	// sent them. The hub calls it once, before Run. f must not block.
	OnBroadcast(f func(msg []byte))
}

// PresenceConfig configures presence.
type PresenceConfig struct {
	// Off disables presence: nothing is tracked, reads fail with ErrPresenceOff.
	Off bool
	// Refresh is how often a node sends all of its entries to the others. Zero means 5 s.
	// Entries of a node not heard from for three refreshes expire.
	Refresh time.Duration
}

// ErrPresenceOff is returned by presence reads when presence is disabled.
var ErrPresenceOff = errors.New("hub: presence is off")

// snapChunk is how many entries one refresh message carries, so that a message stays well
// under the brokers' limits (NATS: 1 MB by default).
const snapChunk = 500

// nodeMsg is a message between nodes.
type nodeMsg struct {
	Node    string          `json:"node"`
	Seq     uint64          `json:"seq"`
	Op      string          `json:"op"` // join, leave, snap, hello, bye, or a command's name
	Topic   string          `json:"topic,omitempty"`
	Info    *ClientInfo     `json:"info,omitempty"`
	Entries []presenceEntry `json:"entries,omitempty"` // snap
	Gen     uint64          `json:"gen,omitempty"`     // snap: which refresh the chunk belongs to
	Last    bool            `json:"last,omitempty"`    // snap: the refresh's last chunk
	Data    json.RawMessage `json:"data,omitempty"`    // a command's argument
}

type presenceEntry struct {
	Topic string     `json:"topic"`
	Info  ClientInfo `json:"info"`
}

// remoteNode is what this node knows of another.
type remoteNode struct {
	seen    time.Time
	seq     uint64
	topics  map[string]map[string]ClientInfo // topic → client → info
	gen     uint64                           // refresh being received
	pending []presenceEntry                  // its chunks so far
}

// presence tracks this node's clients and mirrors the other nodes'. Lock order: mu, then a
// hub shard's mu (fan-out looks topics up), then a sink's own locks.
type presence struct {
	h       *Hub
	off     bool
	node    string
	refresh time.Duration
	bc      Broadcaster // nil: presence stays on this node

	mu     sync.Mutex
	local  map[string]map[string]ClientInfo // guarded by mu
	remote map[string]*remoteNode           // guarded by mu
	cmds   map[string]func(json.RawMessage) // guarded by mu

	sendq chan nodeMsg  // to the sender goroutine, which numbers and sends in order
	snap  chan struct{} // asks the sender for an early refresh (a node said hello)
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// DefaultPresenceRefresh is the default of PresenceConfig.Refresh (--presence-refresh).
const DefaultPresenceRefresh = 5 * time.Second

func newPresence(h *Hub, cfg PresenceConfig) *presence {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultPresenceRefresh
	}
	p := &presence{
		h: h, off: cfg.Off, node: newNodeID(), refresh: cfg.Refresh,
		local: make(map[string]map[string]ClientInfo), remote: make(map[string]*remoteNode),
		cmds:  make(map[string]func(json.RawMessage)),
		sendq: make(chan nodeMsg, 4096), snap: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if bc, ok := h.broker.(Broadcaster); ok {
		p.bc = bc
		bc.OnBroadcast(p.receive)
	}
	return p
}

func newNodeID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// expiry is how long a silent node's entries are kept.
func (p *presence) expiry() time.Duration { return 3 * p.refresh }

// run sends this node's messages in order, refreshes its entries and expires silent nodes,
// until close.
func (p *presence) run() {
	defer close(p.done)
	if p.bc == nil {
		<-p.stop
		return
	}
	var seq, gen uint64
	send := func(m nodeMsg) {
		seq++
		m.Node, m.Seq = p.node, seq
		b, err := json.Marshal(m)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = p.bc.Broadcast(ctx, b) // lost messages are made up for by the next refresh
		cancel()
	}
	refresh := func() {
		gen++
		entries := p.entries()
		for i := 0; i == 0 || i < len(entries); i += snapChunk {
			chunk := entries[i:min(i+snapChunk, len(entries))]
			send(nodeMsg{Op: "snap", Gen: gen, Entries: chunk, Last: i+snapChunk >= len(entries)})
		}
	}
	t := time.NewTicker(p.refresh)
	defer t.Stop()
	send(nodeMsg{Op: "hello"})
	refresh()
	for {
		select {
		case m := <-p.sendq:
			send(m)
		case <-p.snap:
			refresh()
		case <-t.C:
			refresh()
			p.expire(time.Now())
		case <-p.stop:
			// Whatever is queued, then goodbye: the others drop this node's entries at once.
			for {
				select {
				case m := <-p.sendq:
					send(m)
					continue
				default:
				}
				break
			}
			send(nodeMsg{Op: "bye"})
			return
		}
	}
}

func (p *presence) close() {
	p.once.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
	}
}

// enqueue hands m to the sender; when the queue is full the change goes with the next refresh.
func (p *presence) enqueue(m nodeMsg) {
	if p.bc == nil {
		return
	}
	select {
	case p.sendq <- m:
	default:
	}
}

// entries returns this node's entries.
func (p *presence) entries() []presenceEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []presenceEntry
	for topic, cs := range p.local {
		for _, c := range cs {
			out = append(out, presenceEntry{Topic: topic, Info: c})
		}
	}
	return out
}

// started counts s in its topic's presence and starts telling it of joins and leaves.
func (p *presence) started(s *Subscription) {
	if p.off {
		return
	}
	ps, track := s.sink.(PresenceSink)
	w, watch := s.sink.(PresenceWatcher)
	watch = watch && w.WatchPresence()
	if !track && !watch {
		return
	}
	topic := s.topic.name
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.closed.Load() {
		return
	}
	var info ClientInfo
	if track {
		info = ps.PresenceInfo()
		info.Node, info.Joined = p.node, time.Now().UTC().Truncate(time.Millisecond)
		cs := p.local[topic]
		if cs == nil {
			cs = make(map[string]ClientInfo)
			p.local[topic] = cs
		}
		cs[info.Client] = info
		s.present = &info
	}
	if watch {
		w.Presence(topic, p.listLocked(topic))
		s.watching = true
	}
	if track {
		p.fanOutLocked(topic, true, info, s)
		p.enqueue(nodeMsg{Op: "join", Topic: topic, Info: &info})
	}
}

// stopped takes s out of its topic's presence.
func (p *presence) stopped(s *Subscription) {
	if p.off {
		return
	}
	// A sink that neither counts in presence nor watches it (a waiting long poll) was never
	// added: spare the hot path the node-wide lock.
	_, track := s.sink.(PresenceSink)
	_, watch := s.sink.(PresenceWatcher)
	if !track && !watch {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.watching = false
	info := s.present
	if info == nil {
		return
	}
	s.present = nil
	topic := s.topic.name
	if cs := p.local[topic]; cs != nil {
		delete(cs, info.Client)
		if len(cs) == 0 {
			delete(p.local, topic)
		}
	}
	p.fanOutLocked(topic, false, *info, nil)
	p.enqueue(nodeMsg{Op: "leave", Topic: topic, Info: info})
}

// fanOutLocked tells the topic's watchers on this node, but except, of a join or a leave.
func (p *presence) fanOutLocked(topic string, join bool, c ClientInfo, except *Subscription) {
	t := p.h.lookup(topic)
	if t == nil {
		return
	}
	for _, s := range *t.subs.Load() {
		if s == except || !s.watching {
			continue
		}
		w := s.sink.(PresenceWatcher)
		if join {
			w.Join(topic, c)
		} else {
			w.Leave(topic, c)
		}
	}
}

// listLocked returns the clients present on topic, on every node, oldest first.
func (p *presence) listLocked(topic string) []ClientInfo {
	out := make([]ClientInfo, 0, len(p.local[topic]))
	for _, c := range p.local[topic] {
		out = append(out, c)
	}
	for _, n := range p.remote {
		for _, c := range n.topics[topic] {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b ClientInfo) int {
		if c := a.Joined.Compare(b.Joined); c != 0 {
			return c
		}
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Client, b.Client)
	})
	return out
}

// receive applies a message from another node.
func (p *presence) receive(b []byte) {
	var m nodeMsg
	if err := json.Unmarshal(b, &m); err != nil || m.Node == "" || m.Node == p.node {
		return
	}
	p.mu.Lock()
	if fn := p.cmds[m.Op]; fn != nil {
		p.mu.Unlock()
		fn(m.Data)
		return
	}
	defer p.mu.Unlock()
	if p.off {
		return
	}
	n := p.remote[m.Node]
	if n == nil {
		if m.Op == "bye" {
			return
		}
		n = &remoteNode{topics: make(map[string]map[string]ClientInfo)}
		p.remote[m.Node] = n
	}
	if m.Seq <= n.seq && m.Op != "hello" {
		return // older than what was applied (a node restarting says hello with seq 1)
	}
	n.seq, n.seen = m.Seq, time.Now()
	switch m.Op {
	case "hello":
		// A node started (or restarted under the same id, which cannot happen: ids are random):
		// send it ours soon.
		select {
		case p.snap <- struct{}{}:
		default:
		}
	case "join":
		if m.Info != nil && hubTopicOK(m.Topic) {
			p.setRemoteLocked(n, m.Topic, *m.Info, true)
		}
	case "leave":
		if m.Info != nil {
			p.setRemoteLocked(n, m.Topic, *m.Info, false)
		}
	case "snap":
		if m.Gen != n.gen {
			n.gen, n.pending = m.Gen, nil
		}
		n.pending = append(n.pending, m.Entries...)
		if m.Last {
			p.replaceLocked(n, n.pending)
			n.pending = nil
		}
	case "bye":
		p.replaceLocked(n, nil)
		delete(p.remote, m.Node)
	}
}

func hubTopicOK(t string) bool { return ValidateTopic(t) == nil }

// setRemoteLocked records a join or leave of another node's client, telling watchers of a
// change.
func (p *presence) setRemoteLocked(n *remoteNode, topic string, c ClientInfo, join bool) {
	cs := n.topics[topic]
	_, had := cs[c.Client]
	switch {
	case join && !had:
		if cs == nil {
			cs = make(map[string]ClientInfo)
			n.topics[topic] = cs
		}
		cs[c.Client] = c
		p.fanOutLocked(topic, true, c, nil)
	case !join && had:
		delete(cs, c.Client)
		if len(cs) == 0 {
			delete(n.topics, topic)
		}
		p.fanOutLocked(topic, false, c, nil)
	}
}

// replaceLocked makes entries the whole of what n has, telling watchers of the differences.
func (p *presence) replaceLocked(n *remoteNode, entries []presenceEntry) {
	next := make(map[string]map[string]ClientInfo)
	for _, e := range entries {
		if !hubTopicOK(e.Topic) {
			continue
		}
		cs := next[e.Topic]
		if cs == nil {
			cs = make(map[string]ClientInfo)
			next[e.Topic] = cs
		}
		cs[e.Info.Client] = e.Info
	}
	for topic, cs := range n.topics {
		for id, c := range cs {
			if _, ok := next[topic][id]; !ok {
				p.fanOutLocked(topic, false, c, nil)
			}
		}
	}
	for topic, cs := range next {
		for id, c := range cs {
			if _, ok := n.topics[topic][id]; !ok {
				p.fanOutLocked(topic, true, c, nil)
			}
		}
	}
	n.topics = next
}

// expire drops the nodes not heard from for expiry.
func (p *presence) expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, n := range p.remote {
		if now.Sub(n.seen) > p.expiry() {
			p.replaceLocked(n, nil)
			delete(p.remote, id)
		}
	}
}

// Presence returns the clients present on topic on every node, oldest first.
func (h *Hub) Presence(topic string) ([]ClientInfo, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if h.pres.off {
		return nil, ErrPresenceOff
	}
	h.pres.mu.Lock()
	defer h.pres.mu.Unlock()
	return h.pres.listLocked(topic), nil
}

// Node returns this node's id, as presence entries name it.
func (h *Hub) Node() string { return h.pres.node }

// OnCommand registers f to run, on this node, for every command op that another node sends
// with Command. Register before Run.
func (h *Hub) OnCommand(op string, f func(data json.RawMessage)) {
	h.pres.mu.Lock()
	h.pres.cmds[op] = f
	h.pres.mu.Unlock()
}

// Command sends the command op with data to every other node, where the function registered
// with OnCommand runs. The caller acts on this node itself. With a one-node broker it does
// nothing.
func (h *Hub) Command(ctx context.Context, op string, data json.RawMessage) error {
	if h.pres.bc == nil {
		return nil
	}
	// Sent directly, not through the ordered queue: a command is independent of presence, and
	// its caller wants to know whether it went out.
	b, err := json.Marshal(nodeMsg{Node: h.pres.node, Op: op, Data: data})
	if err != nil {
		return err
	}
	if err := h.pres.bc.Broadcast(ctx, b); err != nil {
		return fmt.Errorf("hub: send %s to the other nodes: %w", op, err)
	}
	return nil
}
