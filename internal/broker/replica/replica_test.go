package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

func TestCodecRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_763_000_000_123)
	for _, tc := range []struct{ sender, typ, data string }{
		{"", "", `{"x":1}`},
		{"alice", "TALK", `"a b  c"`},
		{"bob smith", "", `[1, 2]`},
		{"", "ENTER", `{}`},
	} {
		b := AppendTail(AppendHead(nil, 42, "ep0ch"), now, tc.sender, tc.typ, []byte(tc.data))
		p, err := Decode("chat/lobby", b)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if p.Topic != "chat/lobby" || p.Offset != 42 || p.Epoch != "ep0ch" || !p.Time.Equal(now) ||
			p.Sender != tc.sender || p.Type != tc.typ || string(p.Data) != tc.data {
			t.Fatalf("%+v: decoded %+v", tc, p)
		}
		if ps, err := Decode("chat/lobby", string(b)); err != nil ||
			ps.Offset != p.Offset || ps.Epoch != p.Epoch || !ps.Time.Equal(p.Time) || ps.Sender != p.Sender ||
			ps.Type != p.Type || string(ps.Data) != string(p.Data) {
			t.Fatalf("%+v: decoded from a string (as Redis returns it) %+v, %v", tc, ps, err)
		}
		b[len(b)-1] = 'X' // Decode copied the data
		if string(p.Data) != tc.data {
			t.Fatalf("data shares the payload's buffer")
		}
		tail := AppendTail(nil, now, tc.sender, tc.typ, []byte(tc.data))
		if got, err := TailTime(tail); err != nil || !got.Equal(now) {
			t.Fatalf("TailTime = %v, %v", got, err)
		}
	}
	for _, bad := range []string{"", "1 e 2 3", "x e 1 0 0 {}", "1 e 1 5 0 {}", "1 e 1 -1 0 {}"} {
		if _, err := Decode("t", []byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("Decode(%q) = %v, want ErrFormat", bad, err)
		}
		if _, err := Decode("t", bad); !errors.Is(err, ErrFormat) {
			t.Errorf("Decode(string %q) = %v, want ErrFormat", bad, err)
		}
	}
	if _, err := TailTime([]byte("nospace")); !errors.Is(err, ErrFormat) {
		t.Errorf("TailTime: %v", err)
	}
}

func pub(topic string, off uint64, epoch string, at time.Time) *hub.Publication {
	return &hub.Publication{Topic: topic, Offset: off, Epoch: epoch, Time: at, Data: []byte(`1`)}
}

func offsets(ps []*hub.Publication) []uint64 {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = p.Offset
	}
	return out
}

func TestApplyAndHistory(t *testing.T) {
	now := time.Now()
	r := New(func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: 3, TTL: time.Minute} })
	if h := r.History("t", 0, 0, now); h.Top.Offset != 0 || h.Oldest != 0 || h.Publications != nil {
		t.Fatalf("unused topic: %+v", h)
	}
	for off := uint64(1); off <= 5; off++ {
		if !r.Apply(pub("t", off, "e1", now), 10+off) {
			t.Fatalf("offset %d not new", off)
		}
	}
	if r.Apply(pub("t", 4, "e1", now), 99) {
		t.Fatal("an applied offset was taken as new")
	}
	h := r.History("t", 0, 0, now)
	if h.Top != (hub.Position{Offset: 5, Epoch: "e1"}) || h.Oldest != 3 || len(h.Publications) != 3 || h.Publications[0].Offset != 3 {
		t.Fatalf("history: %+v %v", h, offsets(h.Publications))
	}
	if h := r.History("t", 3, 1, now); len(h.Publications) != 1 || h.Publications[0].Offset != 4 {
		t.Fatalf("since 3 limit 1: %v", offsets(h.Publications))
	}
	if h := r.History("t", 5, 0, now); len(h.Publications) != 0 || h.Top.Offset != 5 {
		t.Fatalf("since top: %+v", h)
	}
	last, ok := r.Last("t", now)
	if !ok || last != (Last{Seq: 15, Epoch: "e1", Offset: 5, Time: now}) {
		t.Fatalf("Last = %+v %v", last, ok)
	}
	if last, _ := r.Last("t", now.Add(2*time.Minute)); !last.Expired {
		t.Fatal("not expired after its TTL")
	}

	// A jump in offsets restarts the retained history; a new epoch replaces the old one.
	r.Apply(pub("t", 9, "e1", now), 20)
	if h := r.History("t", 0, 0, now); h.Oldest != 9 || len(h.Publications) != 1 {
		t.Fatalf("after a jump: %+v", h)
	}
	r.Apply(pub("t", 1, "e2", now), 21)
	if h := r.History("t", 0, 0, now); h.Top != (hub.Position{Offset: 1, Epoch: "e2"}) || len(h.Publications) != 1 {
		t.Fatalf("after a new epoch: %+v", h)
	}

	// Expired publications are not returned; a topic with none left is forgotten.
	if h := r.History("t", 0, 0, now.Add(2*time.Minute)); h.Top.Offset != 0 {
		t.Fatalf("expired topic: %+v", h)
	}
	if _, ok := r.Last("t", now); ok {
		t.Fatal("expired topic still known")
	}
	r.Apply(pub("u", 1, "e", now), 30)
	r.Sweep(now.Add(2 * time.Minute))
	if _, ok := r.Last("u", now); ok {
		t.Fatal("Sweep kept an expired topic")
	}
	r.Apply(pub("v", 1, "e", now), 31)
	r.Reset()
	if _, ok := r.Last("v", now); ok {
		t.Fatal("Reset kept a topic")
	}
}

func TestPolicies(t *testing.T) {
	ret, pol := Policies(hub.HistoryPolicy{}, 1000, nil)
	if ret != (hub.HistoryPolicy{Size: 100, TTL: 10 * time.Minute}) || pol("x") != ret {
		t.Fatalf("defaults: %+v %+v", ret, pol("x"))
	}
	user := func(topic string) hub.HistoryPolicy {
		switch topic {
		case "":
			return hub.HistoryPolicy{Size: 50}
		case "small":
			return hub.HistoryPolicy{Size: 5, TTL: time.Second}
		case "durable":
			return hub.HistoryPolicy{Size: 5000, TTL: -1} // durable: narrowed to the durable log's size
		}
		return hub.HistoryPolicy{Size: 1000, TTL: 2 * time.Hour} // more than retained: narrowed
	}
	ret, pol = Policies(hub.HistoryPolicy{TTL: time.Hour}, 1000, user)
	if ret != (hub.HistoryPolicy{Size: 50, TTL: time.Hour}) {
		t.Fatalf("retention: %+v", ret)
	}
	if got := pol("small"); got != (hub.HistoryPolicy{Size: 5, TTL: time.Second}) {
		t.Fatalf("small: %+v", got)
	}
	if got := pol("big"); got != ret {
		t.Fatalf("big: %+v", got)
	}
	if got := pol("durable"); got != (hub.HistoryPolicy{Size: 1000, TTL: -1}) {
		t.Fatalf("durable: %+v", got)
	}
}
