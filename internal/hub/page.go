package hub

import (
	"context"
	"fmt"
)

// Archive keeps durable topics' publications beyond the broker's window (package archive). The
// hub reads it when a page reaches below what the broker retains.
type Archive interface {
	// Added is told of each publication this node published. It must not block: publishing
	// waits for it.
	Added(p *Publication)
	// Page returns up to limit archived publications of topic in epoch with offset < before,
	// newest first. A topic it does not archive has none.
	Page(ctx context.Context, topic, epoch string, before uint64, limit int) ([]*Publication, error)
	// PrevEpoch returns the epoch archived for topic before epoch, with its latest archived
	// offset, and false when there is none.
	PrevEpoch(ctx context.Context, topic, epoch string) (Position, bool, error)
}

// MaxPageLimit is the most publications one page holds.
const MaxPageLimit = 1000

// PageOptions say which page of a topic's history to read, going back in time.
type PageOptions struct {
	// Before bounds the page: publications with offset < Before. Zero means from the newest.
	Before uint64
	// Epoch is the epoch Before belongs to; empty means the current one.
	Epoch string
	// Limit is the most publications returned: 1..MaxPageLimit; zero means 50.
	Limit int
}

// PageResult is one page of history, newest first.
type PageResult struct {
	Publications []*Publication
	// Top is the topic's current position.
	Top Position
	// Next is where the following (older) page starts; nil when nothing older is kept.
	Next *PageCursor
}

// PageCursor is the position of an older page: offsets below Before in Epoch.
type PageCursor struct {
	Before uint64 `json:"before"`
	Epoch  string `json:"epoch"`
}

// Page reads a page of topic's history back in time: from the broker's window while it reaches,
// then from the archive (Config.Archive), in one seamless sequence of offsets. When an epoch's
// offset 1 is reached, Next points at the end of the epoch archived before it, if any.
func (h *Hub) Page(ctx context.Context, name string, opts PageOptions) (PageResult, error) {
	if err := ValidateTopic(name); err != nil {
		return PageResult{}, err
	}
	if opts.Limit == 0 {
		opts.Limit = 50
	}
	if opts.Limit < 0 || opts.Limit > MaxPageLimit {
		return PageResult{}, fmt.Errorf("hub: page limit %d: want 1..%d", opts.Limit, MaxPageLimit)
	}
	top, err := h.broker.History(ctx, name, ^uint64(0), 0)
	if err != nil {
		return PageResult{}, fmt.Errorf("hub: history of %s: %w", name, err)
	}
	res := PageResult{Top: top.Top}
	epoch, before := opts.Epoch, opts.Before
	if epoch == "" {
		epoch = top.Top.Epoch
	}
	if epoch == top.Top.Epoch && (before == 0 || before > top.Top.Offset+1) {
		before = top.Top.Offset + 1
	}
	if before == 0 && epoch != top.Top.Epoch {
		// The newest page of an older epoch: from its end, which the archive knows.
		before = ^uint64(0)
	}
	want := opts.Limit
	if epoch != "" && epoch == top.Top.Epoch && before > 1 {
		// The window first: offsets [before-want, before) as far as the broker retains them.
		since := uint64(0)
		if before-1 > uint64(want) {
			since = before - 1 - uint64(want)
		}
		hr, err := h.broker.History(ctx, name, since, want)
		if err != nil {
			return PageResult{}, fmt.Errorf("hub: history of %s: %w", name, err)
		}
		for i := len(hr.Publications) - 1; i >= 0; i-- {
			if p := hr.Publications[i]; p.Epoch == epoch && p.Offset < before {
				res.Publications = append(res.Publications, p)
			}
		}
		if n := len(res.Publications); n > 0 {
			before = res.Publications[n-1].Offset
		} else if hr.Oldest > 0 && hr.Oldest < before && hr.Top.Epoch == epoch {
			before = hr.Oldest
		}
	}
	if rest := want - len(res.Publications); rest > 0 && before > 1 && h.archive != nil && epoch != "" {
		older, err := h.archive.Page(ctx, name, epoch, before, rest)
		if err != nil {
			return PageResult{}, fmt.Errorf("hub: archive of %s: %w", name, err)
		}
		for _, p := range older {
			if p.Offset < before { // newest first, strictly below what the window gave
				res.Publications = append(res.Publications, p)
				before = p.Offset
			}
		}
	}
	if len(res.Publications) == want && before > 1 {
		res.Next = &PageCursor{Before: before, Epoch: epoch}
		return res, nil
	}
	// This epoch is exhausted here: continue with the one before it, if the archive has one.
	if h.archive != nil && epoch != "" {
		prev, ok, err := h.archive.PrevEpoch(ctx, name, epoch)
		if err != nil {
			return PageResult{}, fmt.Errorf("hub: archive of %s: %w", name, err)
		}
		if ok {
			res.Next = &PageCursor{Before: prev.Offset + 1, Epoch: prev.Epoch}
		}
	}
	return res, nil
}
