package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

func newHub(t testing.TB, size int) *hub.Hub {
	t.Helper()
	b := memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: size} }})
	h := hub.New(hub.Config{Broker: b})
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func publish(t testing.TB, h *hub.Hub, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := h.Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

type collector struct {
	mu   sync.Mutex
	offs []uint64
}

func (c *collector) Deliver(p *hub.Publication) {
	c.mu.Lock()
	c.offs = append(c.offs, p.Offset)
	c.mu.Unlock()
}

func (c *collector) get() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.offs...)
}

func TestSubscribeFromNowAndResume(t *testing.T) {
	h := newHub(t, 10)
	publish(t, h, "a", 3)
	var now collector
	sub, res, err := h.Subscribe(context.Background(), "a", &now, hub.ReadOptions{})
	if err != nil || res.Top.Offset != 3 || !res.Recovered || len(res.Publications) != 0 {
		t.Fatalf("from now: %+v %v", res, err)
	}
	sub.Start()
	var from1 collector
	sub1, res1, _ := h.Subscribe(context.Background(), "a", &from1, hub.ReadOptions{Recover: true, Since: 1, Epoch: res.Top.Epoch})
	if !res1.Recovered || len(res1.Publications) != 2 {
		t.Fatalf("resume: %+v", res1)
	}
	publish(t, h, "a", 1) // arrives while sub1 is still buffering
	sub1.Start()
	publish(t, h, "a", 1)
	if got := fmt.Sprint(now.get()); got != "[4 5]" {
		t.Fatalf("from now got %s", got)
	}
	if got := fmt.Sprint(from1.get()); got != "[2 3 4 5]" {
		t.Fatalf("resumed got %s (replay, then buffered, then live, no duplicates)", got)
	}
	h.Unsubscribe(sub)
	h.Unsubscribe(sub)
	h.Unsubscribe(sub1)
	if n := h.Stats().Subscriptions.Load(); n != 0 {
		t.Fatalf("%d subscriptions left", n)
	}
	if n := h.Stats().Topics.Load(); n != 0 {
		t.Fatalf("%d topics left", n)
	}
}

func TestReadTellsWhatIsGone(t *testing.T) {
	h := newHub(t, 3)
	publish(t, h, "b", 10)
	ctx := context.Background()
	cases := []struct {
		opts      hub.ReadOptions
		recovered bool
		first     uint64
		n         int
	}{
		{hub.ReadOptions{Recover: true, Since: 7}, true, 8, 3},
		{hub.ReadOptions{Recover: true, Since: 10}, true, 0, 0},
		{hub.ReadOptions{Recover: true, Since: 6}, false, 8, 3},
		{hub.ReadOptions{Recover: true, Since: 0}, false, 8, 3},
		{hub.ReadOptions{Recover: true, Since: 12}, false, 8, 3},
		{hub.ReadOptions{Recover: true, Since: 8, Epoch: "nope"}, false, 8, 3},
		{hub.ReadOptions{Recover: true, Since: 7, Limit: 1}, true, 8, 1},
		{hub.ReadOptions{}, true, 0, 0},
	}
	for _, c := range cases {
		res, err := h.Read(ctx, "b", c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered != c.recovered || len(res.Publications) != c.n || (c.n > 0 && res.Publications[0].Offset != c.first) {
			t.Errorf("%+v: got recovered=%v n=%d %q", c.opts, res.Recovered, len(res.Publications), res.Reason)
		}
		if !res.Recovered && res.Reason == "" {
			t.Errorf("%+v: not recovered without a reason", c.opts)
		}
	}
	if _, err := h.Read(ctx, "bad topic", hub.ReadOptions{}); err == nil {
		t.Fatal("bad topic accepted")
	}
}

func TestPublishValidates(t *testing.T) {
	h := newHub(t, 10)
	ctx := context.Background()
	for _, req := range []hub.PublishRequest{
		{Topic: "", Data: json.RawMessage(`{}`)},
		{Topic: "a b", Data: json.RawMessage(`{}`)},
		{Topic: "ok", Data: json.RawMessage(`{`)},
		{Topic: "ok"},
		{Topic: "ok", Data: make(json.RawMessage, 70<<10)},
	} {
		if _, err := h.Publish(ctx, req); err == nil {
			t.Errorf("accepted %q %q", req.Topic, req.Data)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, ok := range []string{"a", "location/7", "chat/lobby", "notify/alice@x.org", "a:b_c-d.e", string(make([]byte, 0)) + "x"} {
		if err := hub.ValidateTopic(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	long := make([]byte, 201)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "a b", "a\x00", "ü", "a,b", "a=b", "a*", string(long)} {
		if err := hub.ValidateTopic(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConcurrentSubscribeUnsubscribePublish(t *testing.T) {
	h := newHub(t, 100)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				publish(t, h, "race", 1)
			}
		}()
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				var c collector
				sub, _, err := h.Subscribe(ctx, "race", &c, hub.ReadOptions{Recover: true, Since: 0})
				if err != nil {
					t.Error(err)
					return
				}
				sub.Start()
				time.Sleep(time.Microsecond)
				h.Unsubscribe(sub)
				offs := c.get()
				for k := 1; k < len(offs); k++ {
					if offs[k] != offs[k-1]+1 {
						t.Errorf("gap or disorder: %v", offs)
						return
					}
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// BenchmarkFanout measures publish → every subscriber's sink at several fan-out sizes.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			h := newHub(b, 100)
			var got atomic.Int64
			sink := hub.SinkFunc(func(p *hub.Publication) { got.Add(1) })
			for i := 0; i < n; i++ {
				s, _, _ := h.Subscribe(context.Background(), "f", sink, hub.ReadOptions{})
				s.Start()
			}
			data := json.RawMessage(`{"x":1,"y":2}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, _ = h.Publish(context.Background(), hub.PublishRequest{Topic: "f", Data: data})
			}
			b.ReportMetric(float64(got.Load())/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkPublishValidate measures Publish with no subscriber at three data sizes: what the
// checks on a publication's data (size, JSON, UTF-8) cost once per publication.
func BenchmarkPublishValidate(b *testing.B) {
	for _, size := range []int{32, 4 << 10, 60 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			h := newHub(b, 100)
			text := strings.Repeat("héllo wörld ", size/14+1)
			data, _ := json.Marshal(map[string]string{"m": text[:size-8]})
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := h.Publish(context.Background(), hub.PublishRequest{Topic: "v", Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPublishRefusesInvalidUTF8: JSON whose strings hold bytes that are not UTF-8 is refused
// (encoding/json alone would accept it), so it is never stored or delivered.
func TestPublishRefusesInvalidUTF8(t *testing.T) {
	h := newHub(t, 10)
	var got atomic.Int64
	s, _, _ := h.Subscribe(context.Background(), "u", hub.SinkFunc(func(*hub.Publication) { got.Add(1) }), hub.ReadOptions{})
	s.Start()
	for _, req := range []hub.PublishRequest{
		{Topic: "u", Data: json.RawMessage("{\"message\":\"\xff\xfe\"}")},
		{Topic: "u", Data: json.RawMessage(`{"m":"ok"}`), Sender: "\xc3"},
		{Topic: "u", Data: json.RawMessage(`{"m":"ok"}`), Type: "T\xed\xa0\x80"}, // an encoded surrogate
	} {
		if _, err := h.Publish(context.Background(), req); !errors.Is(err, hub.ErrBadText) {
			t.Errorf("Publish(%q, sender %q, type %q) = %v, want ErrBadText", req.Data, req.Sender, req.Type, err)
		}
	}
	if _, err := h.Publish(context.Background(), hub.PublishRequest{Topic: "u", Data: json.RawMessage(`{"m":"héllo ✓"}`)}); err != nil {
		t.Fatalf("valid UTF-8 refused: %v", err)
	}
	res, err := h.Read(context.Background(), "u", hub.ReadOptions{Recover: true})
	if err != nil || len(res.Publications) != 1 {
		t.Fatalf("history holds %d publications (%v), want only the valid one", len(res.Publications), err)
	}
	if got.Load() != 1 {
		t.Fatalf("%d deliveries, want 1", got.Load())
	}
}

// slowHistory is the memory broker whose next history read, once armed, waits for the test: the
// window in which a subscription is attached but has not read where it starts.
type slowHistory struct {
	hub.Broker
	armed   atomic.Bool
	reading chan struct{}
	release chan struct{}
}

func (b *slowHistory) History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	if b.armed.Swap(false) {
		b.reading <- struct{}{}
		<-b.release
	}
	return b.Broker.History(ctx, topic, since, limit)
}

// TestSubscriptionCountedFromItsStart: the hub counts a subscription once it has read where it
// starts, so a publisher that waits for the count (as tests and operators' checks do) is
// delivered to. Counted at attach, a publication in the window was both buffered and below the
// starting offset, and dropped as a duplicate.
func TestSubscriptionCountedFromItsStart(t *testing.T) {
	b := &slowHistory{
		Broker:  memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: 10} }}),
		reading: make(chan struct{}), release: make(chan struct{}),
	}
	h := hub.New(hub.Config{Broker: b})
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Someone already follows the topic, so the hub's own first read of it (its baseline) is
	// done and the next read is the subscription's.
	early, _, err := h.Subscribe(context.Background(), "w", &collector{}, hub.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	early.Start()
	b.armed.Store(true)
	var c collector
	subscribed := make(chan *hub.Subscription)
	go func() {
		sub, _, err := h.Subscribe(context.Background(), "w", &c, hub.ReadOptions{})
		if err != nil {
			t.Error(err)
		}
		subscribed <- sub
	}()
	<-b.reading
	if n := h.Stats().Subscriptions.Load(); n != 1 {
		t.Fatalf("counted %d subscriptions, want 1: the second has not read where it starts", n)
	}
	publish(t, h, "w", 1) // before the start: history, not delivered
	close(b.release)
	sub := <-subscribed
	if n := h.Stats().Subscriptions.Load(); n != 2 {
		t.Fatalf("%d subscriptions after Subscribe returned", n)
	}
	sub.Start()
	publish(t, h, "w", 1)
	if got := fmt.Sprint(c.get()); got != "[2]" {
		t.Fatalf("delivered %s, want [2]: what came after the count", got)
	}
	h.Unsubscribe(sub)
	h.Unsubscribe(early)
	if n := h.Stats().Subscriptions.Load(); n != 0 {
		t.Fatalf("%d subscriptions after Unsubscribe", n)
	}
}

// pacedCollector is a PacedSink that pulls its catch-up in small parts from a goroutine of its
// own, as a connection's writer does while its client reads.
type pacedCollector struct {
	collector
	done chan struct{}
}

func (c *pacedCollector) Pace(pull func(int) bool) {
	go func() {
		for pull(1) { // one publication at a time: as slow as a catch-up gets
			time.Sleep(50 * time.Microsecond)
		}
		close(c.done)
	}()
}

// TestPacedCatchUpKeepsLiveOrder: a subscription resuming 3,000 publications is handed them a
// part at a time, and what is published meanwhile (more than the catch-up buffer holds, so part
// of it is read again from history) follows in order, each publication once.
func TestPacedCatchUpKeepsLiveOrder(t *testing.T) {
	h := newHub(t, 10000)
	ctx := context.Background()
	publish(t, h, "paced", 3000)
	c := &pacedCollector{done: make(chan struct{})}
	sub, res, err := h.Subscribe(ctx, "paced", c, hub.ReadOptions{Recover: true})
	if err != nil || !res.Recovered || len(res.Publications) != hub.CatchUpPage {
		t.Fatalf("subscribe: %v %+v (%d publications)", err, res.Recovered, len(res.Publications))
	}
	defer h.Unsubscribe(sub)
	sub.Start()
	big := json.RawMessage(`"` + strings.Repeat("x", 20<<10) + `"`)
	for range 200 { // 4 MB while catching up
		if _, err := h.Publish(ctx, hub.PublishRequest{Topic: "paced", Data: big}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("catch-up did not end")
	}
	publish(t, h, "paced", 10) // live
	eventually.Within(5*time.Second, func() bool { return len(c.get()) >= 3210 })
	offs := c.get()
	for i, o := range offs {
		if o != uint64(i+1) {
			t.Fatalf("delivery %d is offset %d", i, o)
		}
	}
	if len(offs) != 3210 {
		t.Fatalf("%d deliveries, want 3210", len(offs))
	}
}
