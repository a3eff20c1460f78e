package amqp

import (
	"fmt"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

func TestEntryRoundTrip(t *testing.T) {
	id := newID()
	at := time.UnixMilli(1767225600123)
	e, err := parseEntry(appendRequest(nil, id, "amq.gen-q", "chat/room-1", at, "ann", "talk", []byte(`{"t":"hi there"}`)))
	if err != nil || e.kind != kindRequest || e.id != id || e.topic != "chat/room-1" {
		t.Fatalf("request: %+v %v", e, err)
	}
	p, err := e.request()
	if err != nil || p.Offset != 0 || !p.Time.Equal(at) || p.Sender != "ann" || p.Type != "talk" || string(p.Data) != `{"t":"hi there"}` {
		t.Fatalf("decoded request %+v %v", p, err)
	}
	p.Offset, p.Epoch = 7, "abcdefgh"
	e, err = parseEntry(appendAssigned(nil, id, p))
	if err != nil || e.kind != kindAssigned || e.id != id || e.topic != "chat/room-1" {
		t.Fatalf("publication: %+v %v", e, err)
	}
	q, err := e.publication()
	if err != nil || q.Offset != 7 || q.Epoch != "abcdefgh" || !q.Time.Equal(at) || q.Sender != "ann" || q.Type != "talk" || string(q.Data) != `{"t":"hi there"}` {
		t.Fatalf("decoded publication %+v %v", q, err)
	}
	if e, err := parseEntry(appendMarker(id)); err != nil || e.kind != kindMarker || e.id != id {
		t.Fatalf("marker: %+v %v", e, err)
	}
	if e, err := parseEntry(appendSequencer(id, "127.0.0.1:4500")); err != nil || e.kind != kindSequencer || e.id != id || string(e.rest) != "127.0.0.1:4500" {
		t.Fatalf("sequencer: %+v %v", e, err)
	}
	for _, bad := range []string{"", "p", "x " + id, "p " + id, "p " + id + " q bad topic 1 0 0 ", "m " + id + " extra", "q " + id, "c " + id + " 1 0 ", "s " + id, "s " + id + " ", "s " + id + " a b"} {
		if _, err := parseEntry([]byte(bad)); err == nil {
			t.Errorf("parseEntry(%q) accepted", bad)
		}
	}
	// A publication entry whose head or tail does not decode parses, and fails to decode.
	if e, err := parseEntry([]byte("a " + id + " t/1 x")); err != nil {
		t.Fatalf("parseEntry: %v", err)
	} else if _, err := e.publication(); err == nil {
		t.Fatal("decoded a publication without a head")
	}
}

// TestBatch: a batch gives back its entries in order, a single entry itself; a batch with
// anything but well-formed requests or publications is refused whole.
func TestBatch(t *testing.T) {
	at := time.UnixMilli(1767225600123)
	var raws [][]byte
	for i := range 3 {
		raws = append(raws, appendRequest(nil, newID(), "amq.gen-q", fmt.Sprintf("location/g%d", i), at, "ann", "", []byte(fmt.Sprintf(`{"i":%d,"s":"a b"}`, i))))
	}
	raws = append(raws, appendAssigned(nil, newID(), &hub.Publication{Topic: "a/b", Offset: 3, Epoch: "e", Time: at, Data: []byte(`1`)}))
	body := appendBatch(nil, raws)
	got, err := parseMessage(body, nil)
	if err != nil || len(got) != len(raws) {
		t.Fatalf("parseMessage: %d entries, %v", len(got), err)
	}
	for i, e := range got {
		want, _ := parseEntry(raws[i])
		if e.kind != want.kind || e.id != want.id || e.topic != want.topic || string(e.rest) != string(want.rest) {
			t.Fatalf("entry %d: %+v, want %+v", i, e, want)
		}
	}
	marker := appendMarker(newID())
	if one, err := parseMessage(marker, nil); err != nil || len(one) != 1 || one[0].kind != kindMarker {
		t.Fatalf("a single entry: %+v %v", one, err)
	}
	for _, bad := range [][]byte{
		[]byte("b"), []byte("b "), []byte("b 0 "), []byte("b -1 p"), []byte("b +3 abc"),
		appendBatch(nil, [][]byte{marker}),
		appendBatch(nil, [][]byte{raws[0], marker}),
		append(appendBatch(nil, raws[:1]), " 9"...),
		append(appendBatch(nil, raws[:1]), 'x'),
		body[:len(body)-1],
	} {
		if _, err := parseMessage(bad, nil); err == nil {
			t.Errorf("parseMessage(%q) accepted", bad)
		}
	}
}

// FuzzParseEntry: any body parses or is refused without a panic; a publication that decodes
// encodes back to one that decodes the same; a batch that parses is made of requests and
// publications and appends back to one that parses the same.
func FuzzParseEntry(f *testing.F) {
	id := newID()
	at := time.UnixMilli(1)
	f.Add(appendRequest(nil, id, "amq.gen-q", "location/g1", at, "u", "", []byte(`{}`)))
	f.Add(appendAssigned(nil, id, &hub.Publication{Topic: "a/b", Offset: 9, Epoch: "ep", Time: at, Sender: "u", Data: []byte(`{}`)}))
	f.Add(appendMarker(id))
	f.Add(appendHistoryRequest(nil, id, "amq.gen-q", "a/b", 3, 10))
	f.Add(appendListRequest(nil, id, "amq.gen-q", at))
	f.Add(appendBatch(nil, [][]byte{appendReply(nil, id, "a/b", hub.HistoryResult{Top: hub.Position{Offset: 9, Epoch: "ep"}, Oldest: 9}),
		appendAssigned(nil, id, &hub.Publication{Topic: "a/b", Offset: 9, Epoch: "ep", Time: at, Data: []byte(`{}`)})}))
	f.Add(appendTopics(nil, id, []string{"chat/a", "chat/b"}))
	f.Add(appendSequencer(id, "[::1]:4500"))
	f.Add(appendBatch(nil, [][]byte{appendRequest(nil, id, "amq.gen-q", "a/b", at, "u", "", []byte(`1`)), appendRequest(nil, id, "amq.gen-q", "c", time.UnixMilli(2), "", "t", nil)}))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 0 && body[0] == kindBatch {
			es, err := parseMessage(body, nil)
			if err != nil {
				return
			}
			var raws [][]byte
			for _, e := range es {
				if e.kind == kindMarker || e.kind == kindSequencer || e.kind == kindBatch {
					t.Fatalf("batch holds a %c entry", e.kind)
				}
				raws = append(raws, rawEntry(e))
			}
			again, err := parseMessage(appendBatch(nil, raws), nil)
			if err != nil || len(again) != len(es) {
				t.Fatalf("batch does not round-trip: %v", err)
			}
			for i := range es {
				if again[i].id != es[i].id || again[i].topic != es[i].topic || string(again[i].rest) != string(es[i].rest) {
					t.Fatalf("batch entry %d differs after a round trip", i)
				}
			}
			return
		}
		e, err := parseEntry(body)
		if err != nil {
			return
		}
		var p *hub.Publication
		switch e.kind {
		case kindRequest:
			p, err = e.request()
		case kindAssigned:
			p, err = e.publication()
		case kindSequencer:
			again, err := parseEntry(appendSequencer(e.id, string(e.rest)))
			if err != nil || again.id != e.id || string(again.rest) != string(e.rest) {
				t.Fatalf("sequencer entry does not round-trip: %+v vs %+v (%v)", again, e, err)
			}
			return
		default:
			return
		}
		if err != nil {
			return
		}
		if p.Topic != e.topic {
			t.Fatalf("decoded topic %q from %q", p.Topic, e.topic)
		}
		again, err := parseEntry(appendAssigned(nil, e.id, p))
		if err != nil {
			t.Fatalf("re-encoded publication does not parse: %v", err)
		}
		q, err := again.publication()
		if err != nil || q.Offset != p.Offset || q.Epoch != p.Epoch || !q.Time.Equal(p.Time) || q.Sender != p.Sender || q.Type != p.Type || string(q.Data) != string(p.Data) {
			t.Fatalf("publication does not round-trip: %+v vs %+v (%v)", q, p, err)
		}
	})
}

// rawEntry appends e's fields back as parseEntry found them.
func rawEntry(e entry) []byte {
	b := fmt.Appendf(nil, "%c %s", e.kind, e.id)
	if e.reply != "" {
		b = fmt.Appendf(b, " %s", e.reply)
	}
	if e.topic != "" {
		b = fmt.Appendf(b, " %s", e.topic)
	}
	if e.kind != kindTopics || len(e.rest) > 0 {
		b = fmt.Appendf(b, " %s", e.rest)
	}
	return b
}

// TestAnswers: history and list requests and their answers round-trip.
func TestAnswers(t *testing.T) {
	id := newID()
	e, err := parseEntry(appendHistoryRequest(nil, id, "amq.gen-q", "chat/x", 7, 20))
	if err != nil || e.kind != kindHistory || e.reply != "amq.gen-q" || e.topic != "chat/x" {
		t.Fatalf("history request: %+v %v", e, err)
	}
	if since, limit, err := e.historyRequest(); since != 7 || limit != 20 || err != nil {
		t.Fatalf("history request: since %d limit %d %v", since, limit, err)
	}
	hr := hub.HistoryResult{Top: hub.Position{Offset: 9, Epoch: "ep"}, Oldest: 3}
	e, err = parseEntry(appendReply(nil, id, "chat/x", hr))
	if err != nil || e.kind != kindReply {
		t.Fatalf("reply: %+v %v", e, err)
	}
	if got, err := e.historyHead(); err != nil || got.Top != hr.Top || got.Oldest != 3 {
		t.Fatalf("reply head: %+v %v", got, err)
	}
	e, err = parseEntry(appendReply(nil, id, "chat/x", hub.HistoryResult{}))
	if got, _ := e.historyHead(); err != nil || got.Top != (hub.Position{}) {
		t.Fatalf("empty reply head: %+v %v", got, err)
	}
	e, err = parseEntry(appendTopics(nil, id, []string{"chat/a", "chat/b"}))
	if err != nil || e.kind != kindTopics || fmt.Sprint(e.topics()) != "[chat/a chat/b]" {
		t.Fatalf("topics: %+v %v", e, err)
	}
	if e, err = parseEntry(appendTopics(nil, id, nil)); err != nil || len(e.topics()) != 0 {
		t.Fatalf("no topics: %+v %v", e, err)
	}
	e, err = parseEntry(appendListRequest(nil, id, "amq.gen-q", time.UnixMilli(5)))
	if err != nil || e.kind != kindList || e.reply != "amq.gen-q" || string(e.rest) != "5" {
		t.Fatalf("list request: %+v %v", e, err)
	}
}
