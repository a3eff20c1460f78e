package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/faultproxy"
	"github.com/rtlab/rtlab/internal/servertest"
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

// TestUnknownOutcomeHoldsLaterPublishes: on a node whose Redis is black-holed, a keyed
// WebSocket publish is answered outcome_unknown (it may yet run, and does when the network
// heals); until its retry is answered, the connection's next publish is refused as not
// published, so that the late one cannot land after it. History then holds the keyed
// publication once, before the next one. A bystander on another node of the same Redis is
// served throughout.
func TestUnknownOutcomeHoldsLaterPublishes(t *testing.T) {
	redis := brokertest.StartRedis(t)
	proxy, err := faultproxy.Start(redis.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	p := servertest.Start(t, bin, "--broker", "redis://"+proxy.Addr())
	_, b := startWithBystander(t, "news/bystander", "--broker", redis.URL) // its path to Redis is whole
	w := dialWS(t, p.WS("/api/ws"), attacker, nil)
	w.Until(`"connected"`, 15*time.Second)
	proxy.Set(faultproxy.BlackHole)
	w.Send(`{"op":"publish","topic":"news/held","data":{"n":1},"idem":"first"}`)
	if m := w.Op("error"); m.Code != "outcome_unknown" || !strings.Contains(m.Reason, "same idempotency key") {
		t.Fatalf("publish into a black hole: %+v, want outcome_unknown", m)
	}
	w.Send(`{"op":"publish","topic":"news/held","data":{"n":2},"idem":"second"}`)
	if m := w.Op("error"); m.Code != "unavailable" || !strings.Contains(m.Reason, "retry it first") {
		t.Fatalf("the next publish while the first is unresolved: %+v", m)
	}
	proxy.Set(faultproxy.Pass)
	publishUntilAcked(t, w, `{"op":"publish","topic":"news/held","data":{"n":1},"idem":"first"}`)
	publishUntilAcked(t, w, `{"op":"publish","topic":"news/held","data":{"n":2},"idem":"second"}`)
	_, _, body := get(t, httpFrom(attacker), p.URL()+"/api/topics/news/held/history?since=0")
	var hist tt.PollAnswer
	if err := json.Unmarshal(body, &hist); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pub := range hist.Publications {
		got = append(got, string(pub.Data))
	}
	if strings.Join(got, " ") != `{"n":1} {"n":2}` {
		t.Fatalf("history holds %v, want the keyed publication once, then the next", got)
	}
	check(t, b, 5)
}

// publishUntilAcked sends a publish until it is acknowledged (the broker comes back).
func publishUntilAcked(t *testing.T, w *tt.WSConn, msg string) {
	t.Helper()
	eventually.Nil(t, 60*time.Second, func() error {
		w.Send(msg)
		for {
			b, err := w.Next(30 * time.Second)
			if err != nil {
				return err
			}
			var m tt.Msg
			if json.Unmarshal(b, &m) != nil {
				continue
			}
			switch m.Op {
			case "ack":
				return nil
			case "error":
				time.Sleep(200 * time.Millisecond)
				return fmt.Errorf("%s: %s", m.Code, m.Reason)
			}
		}
	})
}
