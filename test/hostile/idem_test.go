package hostile

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// keyedPost publishes body to topic with an Idempotency-Key from the attacker's address.
func keyedPost(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := httpFrom(attacker).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	var ans map[string]any
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		t.Fatalf("POST %s: answer: %v", url, err)
	}
	return res.StatusCode, ans
}

// TestRetriesPublishOnce: a publish retried with its idempotency key, on HTTP, WebSocket and
// STOMP, is answered with the original offset, marked duplicate, and is in history once; a bad
// key is refused with its reason, and a bystander is served throughout.
func TestRetriesPublishOnce(t *testing.T) {
	p, b := startWithBystander(t, "news/bystander")
	url := p.URL() + "/api/publish/news/keyed"
	code, first := keyedPost(t, url, "h-1", `{"n":1}`)
	if code != 200 || first["duplicate"] != nil {
		t.Fatalf("first keyed POST: %d %v", code, first)
	}
	code, again := keyedPost(t, url, "h-1", `{"n":1}`)
	if code != 200 || again["offset"] != first["offset"] || again["duplicate"] != true {
		t.Fatalf("retried POST: %d %v, want offset %v, duplicate", code, again, first["offset"])
	}
	for _, bad := range []string{strings.Repeat("k", 65), "with space", "caf\u00e9"} {
		if code, ans := keyedPost(t, url, bad, `{}`); code != 400 || !strings.Contains(ans["reason"].(string), "idempotency key") {
			t.Fatalf("key %q: %d %v, want 400 naming the key", bad, code, ans)
		}
	}

	w := dialWS(t, p.WS("/api/ws"), attacker, nil)
	w.Until(`"connected"`, 15*time.Second)
	var acks [2]tt.Msg
	for i := range acks {
		w.Send(`{"op":"publish","topic":"news/keyed","data":{"n":2},"idem":"w-1"}`)
		acks[i] = w.Op("ack")
	}
	if acks[1].Offset != acks[0].Offset || acks[0].Offset == 0 {
		t.Fatalf("WebSocket retry acked at %d, first at %d", acks[1].Offset, acks[0].Offset)
	}
	w.Send(`{"op":"publish","topic":"news/keyed","data":{},"idem":"` + strings.Repeat("k", 65) + `"}`)
	if m := w.Op("error"); m.Code != "bad_request" || !strings.Contains(m.Reason, "idempotency key") {
		t.Fatalf("WebSocket bad key: %+v", m)
	}

	s := stompConnect(t, p)
	var receipts [2]string
	for i := range receipts {
		s.Send("SEND\ndestination:/topic/news/keyed\nidempotency-key:s-1\nreceipt:r\n\n{\"n\":3}\x00")
		receipts[i] = stompFrame(t, s, "RECEIPT")
	}
	if !strings.Contains(receipts[1], "duplicate:true") || offsetHeader(receipts[0]) != offsetHeader(receipts[1]) {
		t.Fatalf("STOMP retry: %q after %q", receipts[1], receipts[0])
	}
	s.Send("SEND\ndestination:/topic/news/keyed\nidempotency-key:bad key\n\n{}\x00")
	if f := stompFrame(t, s, "ERROR"); !strings.Contains(f, "idempotency key") {
		t.Fatalf("STOMP bad key: %q", f)
	}

	_, _, body := get(t, httpFrom(attacker), p.URL()+"/api/topics/news/keyed/history?since=0")
	var hist tt.PollAnswer
	if err := json.Unmarshal(body, &hist); err != nil || len(hist.Publications) != 3 {
		t.Fatalf("history holds %d publications (%v), want 3: %s", len(hist.Publications), err, body)
	}
	check(t, b, 5)
}

// offsetHeader is a RECEIPT frame's offset header.
func offsetHeader(frame string) string {
	for _, line := range strings.Split(frame, "\n") {
		if v, ok := strings.CutPrefix(line, "offset:"); ok {
			return v
		}
	}
	return ""
}
