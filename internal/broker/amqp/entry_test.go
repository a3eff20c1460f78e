package amqp

import (
	"fmt"
	"maps"
	"testing"
	"time"
)

// TestCounterSameLogSameOffsets: two counters reading one log agree, one of them starting from
// a checkpoint taken halfway; a topic idle for longer than the TTL on the log clock starts a
// new epoch at 1.
func TestCounterSameLogSameOffsets(t *testing.T) {
	type pub struct {
		topic string
		at    int64
	}
	var log []pub
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 40 {
		log = append(log, pub{topic: fmt.Sprintf("t/%d", i%3), at: base + int64(i)*1000})
	}
	// t/9 publishes once early; t/0 then stays quiet for more than the TTL (60 s).
	log = append([]pub{{"t/9", base}}, log...)
	log = append(log, pub{"t/1", base + 60_000}, pub{"t/0", base + 201_000}, pub{"t/9", base + 202_000})

	type got struct {
		offset uint64
		epoch  string
	}
	run := func(c *counter, from int) []got {
		var out []got
		for i, p := range log[from:] {
			id := fmt.Sprintf("%08d%016d", from+i, 0)
			o, e := c.next(p.topic, id, p.at)
			out = append(out, got{o, e})
		}
		return out
	}
	whole := run(newCounter(time.Minute), 0)

	half := newCounter(time.Minute)
	for i, p := range log[:20] {
		half.next(p.topic, fmt.Sprintf("%08d%016d", i, 0), p.at)
	}
	cp, err := parseEntry(half.appendCheckpoint(nil, newID(), 19))
	if err != nil || cp.kind != kindCheckpoint || cp.at != 19 {
		t.Fatalf("checkpoint entry: %+v %v", cp, err)
	}
	restored := newCounter(time.Minute)
	if err := restored.restore(cp); err != nil {
		t.Fatal(err)
	}
	rest := run(restored, 20)
	for i, g := range rest {
		if g != whole[20+i] {
			t.Fatalf("entry %d: from the checkpoint %+v, from the start %+v", 20+i, g, whole[20+i])
		}
	}
	n := len(log)
	// log[n-6] is t/1's publication before the tail (i = 37).
	if whole[1].offset != 1 || whole[n-3].epoch != whole[n-6].epoch || whole[n-3].offset != whole[n-6].offset+1 {
		t.Fatalf("t/0 starts at %+v; t/1 after 23 s: %+v then %+v", whole[1], whole[n-6], whole[n-3])
	}
	if last := whole[n-2]; last.offset != 1 || last.epoch == whole[1].epoch {
		t.Fatalf("t/0 after more than the TTL: %+v, want a new epoch at 1 (old %q)", last, whole[1].epoch)
	}
	if last := whole[n-1]; last.offset != 1 || last.epoch == whole[0].epoch {
		t.Fatalf("t/9 after more than the TTL: %+v, want a new epoch at 1", last)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	id := newID()
	at := time.UnixMilli(1767225600123)
	e, err := parseEntry(appendPub(nil, id, "chat/room-1", at, "ann", "talk", []byte(`{"t":"hi there"}`)))
	if err != nil || e.kind != kindPub || e.id != id || e.topic != "chat/room-1" {
		t.Fatalf("publication: %+v %v", e, err)
	}
	p, err := e.publication(7, "abcdefgh")
	if err != nil || p.Offset != 7 || p.Epoch != "abcdefgh" || !p.Time.Equal(at) || p.Sender != "ann" || p.Type != "talk" || string(p.Data) != `{"t":"hi there"}` {
		t.Fatalf("decoded %+v %v", p, err)
	}
	for _, kind := range []byte{kindMarker, kindRequest} {
		if e, err := parseEntry(appendSimple(kind, id)); err != nil || e.kind != kind || e.id != id {
			t.Fatalf("%c: %+v %v", kind, e, err)
		}
	}
	if e, err := parseEntry(appendReset(id, 42)); err != nil || e.kind != kindReset || e.clock != 42 {
		t.Fatalf("reset: %+v %v", e, err)
	}
	for _, bad := range []string{"", "p", "x " + id, "p " + id, "p " + id + " bad topic 1 0 0 ", "m " + id + " extra", "c " + id + " -1 0 ", "r " + id + " soon"} {
		if _, err := parseEntry([]byte(bad)); err == nil {
			t.Errorf("parseEntry(%q) accepted", bad)
		}
	}
}

// TestBatch: a batch gives back its publications in order, a single entry itself; a batch
// with anything but well-formed publications is refused whole.
func TestBatch(t *testing.T) {
	at := time.UnixMilli(1767225600123)
	var pubs [][]byte
	for i := range 3 {
		pubs = append(pubs, appendPub(nil, newID(), fmt.Sprintf("location/g%d", i), at, "ann", "", []byte(fmt.Sprintf(`{"i":%d,"s":"a b"}`, i))))
	}
	body := appendBatch(nil, pubs)
	got, err := parseMessage(body, nil)
	if err != nil || len(got) != len(pubs) {
		t.Fatalf("parseMessage: %d entries, %v", len(got), err)
	}
	for i, e := range got {
		want, _ := parseEntry(pubs[i])
		if e.id != want.id || e.topic != want.topic || string(e.tail) != string(want.tail) {
			t.Fatalf("entry %d: %+v, want %+v", i, e, want)
		}
	}
	marker := appendSimple(kindMarker, newID())
	if one, err := parseMessage(marker, nil); err != nil || len(one) != 1 || one[0].kind != kindMarker {
		t.Fatalf("a single entry: %+v %v", one, err)
	}
	for _, bad := range [][]byte{
		[]byte("b"), []byte("b "), []byte("b 0 "), []byte("b -1 p"), []byte("b +3 abc"),
		appendBatch(nil, [][]byte{marker}),
		appendBatch(nil, [][]byte{pubs[0], marker}),
		append(appendBatch(nil, pubs[:1]), " 9"...),
		append(appendBatch(nil, pubs[:1]), 'x'),
		body[:len(body)-1],
	} {
		if _, err := parseMessage(bad, nil); err == nil {
			t.Errorf("parseMessage(%q) accepted", bad)
		}
	}
}

// FuzzParseEntry: any body parses or is refused without a panic; a checkpoint that parses
// restores or is refused; a publication that parses decodes with the offset given; a batch
// that parses is made of publications and appends back to one that parses the same.
func FuzzParseEntry(f *testing.F) {
	id := newID()
	f.Add(appendPub(nil, id, "location/g1", time.UnixMilli(1), "u", "", []byte(`{}`)))
	f.Add(appendSimple(kindMarker, id))
	f.Add(appendReset(id, 5))
	c := newCounter(time.Minute)
	c.next("a/b", id, 10)
	f.Add(c.appendCheckpoint(nil, id, 3))
	f.Add(appendBatch(nil, [][]byte{appendPub(nil, id, "a/b", time.UnixMilli(1), "u", "", []byte(`1`)), appendPub(nil, id, "c", time.UnixMilli(2), "", "t", nil)}))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 0 && body[0] == kindBatch {
			es, err := parseMessage(body, nil)
			if err != nil {
				return
			}
			var raws [][]byte
			for _, e := range es {
				if e.kind != kindPub {
					t.Fatalf("batch holds a %c entry", e.kind)
				}
				raws = append(raws, fmt.Appendf(nil, "p %s %s %s", e.id, e.topic, e.tail))
			}
			again, err := parseMessage(appendBatch(nil, raws), nil)
			if err != nil || len(again) != len(es) {
				t.Fatalf("batch does not round-trip: %v", err)
			}
			for i := range es {
				if again[i].id != es[i].id || again[i].topic != es[i].topic || string(again[i].tail) != string(es[i].tail) {
					t.Fatalf("batch entry %d differs after a round trip", i)
				}
			}
			return
		}
		e, err := parseEntry(body)
		if err != nil {
			return
		}
		switch e.kind {
		case kindCheckpoint:
			c := newCounter(time.Minute)
			if c.restore(e) == nil {
				c.ttl = 1 << 62 // keep every topic: prune must not hide a difference
				again, err := parseEntry(c.appendCheckpoint(nil, id, e.at))
				c2 := newCounter(time.Minute)
				if err != nil || c2.restore(again) != nil || !maps.Equal(c.topics, c2.topics) || c.clock != c2.clock {
					t.Fatalf("checkpoint does not round-trip: %v", err)
				}
			}
		case kindPub:
			if p, err := e.publication(3, "epoch"); err == nil && (p.Offset != 3 || p.Topic != e.topic) {
				t.Fatalf("decoded %+v", p)
			}
		}
	})
}
