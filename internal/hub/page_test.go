package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
)

// fakeArchive holds publications by epoch, epochs in the order added.
type fakeArchive struct {
	epochs []string
	pubs   map[string][]*hub.Publication // by epoch, ascending offsets
}

func (a *fakeArchive) add(p *hub.Publication) {
	if a.pubs == nil {
		a.pubs = map[string][]*hub.Publication{}
	}
	if _, ok := a.pubs[p.Epoch]; !ok {
		a.epochs = append(a.epochs, p.Epoch)
	}
	a.pubs[p.Epoch] = append(a.pubs[p.Epoch], p)
}

func (a *fakeArchive) Added(*hub.Publication) {} // the tests add what they need

func (a *fakeArchive) Page(_ context.Context, _, epoch string, before uint64, limit int) ([]*hub.Publication, error) {
	ps := a.pubs[epoch]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].Offset >= before })
	var out []*hub.Publication
	for i--; i >= 0 && len(out) < limit; i-- {
		out = append(out, ps[i])
	}
	return out, nil
}

func (a *fakeArchive) PrevEpoch(_ context.Context, _, epoch string) (hub.Position, bool, error) {
	for i, e := range a.epochs {
		if e == epoch && i > 0 {
			prev := a.pubs[a.epochs[i-1]]
			return hub.Position{Offset: prev[len(prev)-1].Offset, Epoch: a.epochs[i-1]}, true, nil
		}
	}
	return hub.Position{}, false, nil
}

// TestPage: pages read the window, then the archive below it, with no gap or duplicate at the
// boundary; at an epoch's offset 1 the cursor moves to the epoch archived before it.
func TestPage(t *testing.T) {
	ctx := context.Background()
	b := memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: 30, TTL: -1} }})
	arch := &fakeArchive{}
	// An older epoch, only in the archive: offsets 1..25.
	for i := uint64(1); i <= 25; i++ {
		arch.add(&hub.Publication{Topic: "chat/p", Epoch: "old", Offset: i, Data: json.RawMessage(`{}`)})
	}
	h := hub.New(hub.Config{Broker: b, Archive: arch})
	if err := h.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var epoch string
	for i := range 100 {
		p, err := h.Publish(ctx, hub.PublishRequest{Topic: "chat/p", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		arch.add(p) // archived as the archiver would
		epoch = p.Epoch
	}
	var got []string
	opts := hub.PageOptions{Limit: 7}
	for range 100 {
		res, err := h.Page(ctx, "chat/p", opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Top != (hub.Position{Offset: 100, Epoch: epoch}) {
			t.Fatalf("top %+v", res.Top)
		}
		for _, p := range res.Publications {
			got = append(got, fmt.Sprintf("%d:%s", p.Offset, p.Epoch))
		}
		if res.Next == nil {
			break
		}
		opts.Before, opts.Epoch = res.Next.Before, res.Next.Epoch
	}
	var want []string
	for i := 100; i >= 1; i-- {
		want = append(want, fmt.Sprintf("%d:%s", i, epoch))
	}
	for i := 25; i >= 1; i-- {
		want = append(want, fmt.Sprintf("%d:old", i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged\n%v\nwant\n%v", got, want)
	}
	// Before beyond the newest starts from the newest; without an archive the window ends it.
	res, err := h.Page(ctx, "chat/p", hub.PageOptions{Before: 1 << 40, Limit: 2})
	if err != nil || len(res.Publications) != 2 || res.Publications[0].Offset != 100 || res.Next == nil || res.Next.Before != 99 {
		t.Fatalf("before beyond the top: %+v %v", res, err)
	}
	plain := hub.New(hub.Config{Broker: b})
	res, err = plain.Page(ctx, "chat/p", hub.PageOptions{Before: 75, Limit: 50})
	if err != nil || len(res.Publications) != 4 || res.Publications[3].Offset != 71 || res.Next != nil {
		t.Fatalf("window only: %d publications, next %+v, %v", len(res.Publications), res.Next, err)
	}
	if _, err := h.Page(ctx, "chat/p", hub.PageOptions{Limit: 1001}); err == nil {
		t.Fatal("limit 1001 accepted")
	}
}
