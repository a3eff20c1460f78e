package serverapi

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/notify"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// newAPI serves the server API with key on a transport server over a real hub.
func newAPI(t *testing.T, key string) *tt.Server {
	t.Helper()
	var mux *http.ServeMux
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxFrame: 1024},
		Routes: func(m *http.ServeMux, _ *transport.Server) { mux = m }})
	log := slog.New(slog.DiscardHandler)
	rooms := chat.New(s.Hub, state.NewMemory(), notify.New(s.Hub, log),
		chat.Config{MaxMsg: 1024, MaxMembers: 2, MaxRooms: 10, Idle: time.Minute}, log)
	Routes(mux, key, s.Hub, s.Transport, rooms, log)
	return s
}

// TestKeyBodyAndRoutes: without --api-key the routes are 404; a missing or wrong key is 401, a
// body over the bound 413, one that is no JSON object 400; the key's holder publishes, reads
// history and creates a room within the member bound.
func TestKeyBodyAndRoutes(t *testing.T) {
	if code := tt.Post(t, newAPI(t, "").URL+"/api/server/publish", `{}`, nil); code != http.StatusNotFound {
		t.Fatalf("without a key: %d", code)
	}
	s := newAPI(t, "k")
	call := func(key, path, body string, v any) int {
		d := tt.Dialer{Header: http.Header{}}
		if key != "" {
			d.Header.Set("Authorization", "apikey "+key)
		}
		return d.JSON(t, "POST", s.URL+"/api/server/"+path, body, v)
	}
	for name, c := range map[string]struct {
		key, body string
		want      int
	}{
		"no key":        {"", `{"topic":"a","data":1}`, http.StatusUnauthorized},
		"wrong key":     {"x", `{"topic":"a","data":1}`, http.StatusUnauthorized},
		"too large":     {"k", `{"topic":"a","data":"` + strings.Repeat("x", 8000) + `"}`, http.StatusRequestEntityTooLarge},
		"not an object": {"k", `[1]`, http.StatusBadRequest},
		"no data":       {"k", `{"topic":"a"}`, http.StatusBadRequest},
	} {
		if code := call(c.key, "publish", c.body, nil); code != c.want {
			t.Errorf("%s: %d, want %d", name, code, c.want)
		}
	}
	var pub struct{ Offset uint64 }
	if code := call("k", "publish", `{"topic":"notify/ann","data":{"n":1}}`, &pub); code != 200 || pub.Offset != 1 {
		t.Fatalf("publish: %d %+v", code, pub)
	}
	var hist struct{ Publications []map[string]any }
	if code := call("k", "history", `{"topic":"notify/ann"}`, &hist); code != 200 || len(hist.Publications) != 1 {
		t.Fatalf("history: %d %+v", code, hist)
	}
	if code := call("k", "rooms", `{"room":"r","owner":"ann","invited":["a","b","c"]}`, nil); code != http.StatusBadRequest {
		t.Fatalf("a room over the member bound: %d", code)
	}
	var room chat.RoomInfo
	if code := call("k", "rooms", `{"room":"r","owner":"ann","invited":["bob"]}`, &room); code != 200 || room.Owner != "ann" || !room.Private {
		t.Fatalf("rooms: %d %+v", code, room)
	}
}

// TestPublishIdempotencyKey: a publish retried with the same Idempotency-Key is answered with
// the first one's position and marked duplicate, publishing nothing; a bad key is 400.
func TestPublishIdempotencyKey(t *testing.T) {
	s := newAPI(t, "k")
	publish := func(key string, v any) int {
		d := tt.Dialer{Header: http.Header{}}
		d.Header.Set("Authorization", "apikey k")
		if key != "" {
			d.Header.Set("Idempotency-Key", key)
		}
		return d.JSON(t, "POST", s.URL+"/api/server/publish", `{"topic":"notify/ann","data":{"n":1},"sender":"backend"}`, v)
	}
	type answer struct {
		Offset    uint64
		Epoch     string
		Duplicate bool
	}
	var first, again, other answer
	if code := publish("order-1", &first); code != 200 || first.Duplicate {
		t.Fatalf("first publish: %d %+v", code, first)
	}
	if code := publish("order-1", &again); code != 200 || !again.Duplicate || again.Offset != first.Offset || again.Epoch != first.Epoch {
		t.Fatalf("retry: %d %+v, want the first's position %+v marked duplicate", code, again, first)
	}
	if code := publish("order-2", &other); code != 200 || other.Duplicate || other.Offset != first.Offset+1 {
		t.Fatalf("another key: %d %+v", code, other)
	}
	if code := publish("has space", nil); code != http.StatusBadRequest {
		t.Fatalf("a bad key: %d, want 400", code)
	}
	var hist struct{ Publications []map[string]any }
	d := tt.Dialer{Header: http.Header{"Authorization": {"apikey k"}}}
	if code := d.JSON(t, "POST", s.URL+"/api/server/history", `{"topic":"notify/ann"}`, &hist); code != 200 || len(hist.Publications) != 2 {
		t.Fatalf("history: %d, %d publications, want 2", code, len(hist.Publications))
	}
}
