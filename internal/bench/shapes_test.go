package bench

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"github.com/golang-jwt/jwt/v5"

	"github.com/rtlab/rtlab/internal/stomp"
)

// Small servers of the shapes teams build themselves (examples/targets): each a real listener
// on loopback, written as such a team would, so that the profiles are proven on them.

// fanout is a set of members per group, each with its outgoing queue.
type fanout struct {
	mu     sync.Mutex
	groups map[string]map[chan []byte]bool
	n      atomic.Int64 // deliveries offered
	dropEv int64        // drop every dropEv-th delivery; 0 drops none
}

func newFanout() *fanout { return &fanout{groups: map[string]map[chan []byte]bool{}} }

func (f *fanout) join(g string) chan []byte {
	ch := make(chan []byte, 4096)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[g] == nil {
		f.groups[g] = map[chan []byte]bool{}
	}
	f.groups[g][ch] = true
	return ch
}

func (f *fanout) leave(g string, ch chan []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.groups[g], ch)
	close(ch) // sends happen under mu: none can come now
}

func (f *fanout) send(g string, msg []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.groups[g] {
		if n := f.n.Add(1); f.dropEv > 0 && n%f.dropEv == 0 {
			continue
		}
		select {
		case ch <- msg:
		default: // a member that does not read loses it, as a real server's would
		}
	}
}

// wsServe upgrades r and runs the connection: in hands each text frame to in, out's messages
// are written as text frames.
func wsServe(w http.ResponseWriter, r *http.Request, proto string, out chan []byte, in func(conn net.Conn, p []byte)) {
	up := ws.HTTPUpgrader{Protocol: func(p string) bool { return proto != "" && p == proto }}
	conn, _, _, err := up.Upgrade(r, w)
	if err != nil {
		return
	}
	defer conn.Close()
	done := make(chan struct{})
	defer close(done)
	var wmu sync.Mutex
	go func() {
		for {
			select {
			case m, ok := <-out:
				if !ok {
					return
				}
				wmu.Lock()
				err := wsutil.WriteServerText(conn, m)
				wmu.Unlock()
				if err != nil {
					_ = conn.Close()
					return
				}
			case <-done:
				return
			}
		}
	}()
	for {
		p, op, err := wsutil.ReadClientData(conn)
		if err != nil {
			return
		}
		if op == ws.OpText {
			in(conn, p)
		}
	}
}

// wsEnvelopeServer: raw WebSocket at /ws/location?group=G; every text frame reaches every
// member as {"type":"LOCATION","payload":<frame>}.
func wsEnvelopeServer(t *testing.T) *httptest.Server {
	f := newFanout()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/location", func(w http.ResponseWriter, r *http.Request) {
		g := r.URL.Query().Get("group")
		out := f.join(g)
		defer f.leave(g, out)
		wsServe(w, r, "", out, func(_ net.Conn, p []byte) {
			f.send(g, []byte(`{"type":"LOCATION","payload":`+string(p)+`}`))
		})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// sseDTOServer: GET /location/sse/connect?group=G streams event: location with
// {"userId","lat","lng","sentAt"}; POST /location/sse/share?group=G takes {"userId","x","y"},
// copies x to lat and y to lng and drops the rest. It drops every dropEvery-th delivery.
func sseDTOServer(t *testing.T, dropEvery int64, wrap ...func(http.Handler) http.Handler) *httptest.Server {
	f := newFanout()
	f.dropEv = dropEvery
	mux := http.NewServeMux()
	mux.HandleFunc("GET /location/sse/connect", func(w http.ResponseWriter, r *http.Request) {
		g := r.URL.Query().Get("group")
		out := f.join(g)
		defer f.leave(g, out)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case m, ok := <-out:
				if !ok {
					return
				}
				if _, err := fmt.Fprintf(w, "event: location\ndata: %s\n\n", m); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /location/sse/share", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID int64
			X, Y   float64
		}
		var raw map[string]json.Number
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		in.UserID, _ = raw["userId"].Int64()
		in.X, _ = raw["x"].Float64()
		in.Y, _ = raw["y"].Float64()
		out, _ := json.Marshal(map[string]any{"userId": in.UserID, "lat": in.X, "lng": in.Y, "sentAt": time.Now().UnixMilli()})
		f.send(r.URL.Query().Get("group"), out)
		w.WriteHeader(http.StatusOK)
	})
	var h http.Handler = mux
	for _, w := range wrap {
		h = w(h)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// stompNoReceiptServer: STOMP over WebSocket at /ws-stomp, a simple broker that sends no
// RECEIPT frames and heart-beat:0,0; SEND /pub/location/G arrives as MESSAGE on
// /sub/location/G with the body unchanged.
func stompNoReceiptServer(t *testing.T) *httptest.Server {
	f := newFanout()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws-stomp", func(w http.ResponseWriter, r *http.Request) {
		var subs []struct {
			g   string
			out chan []byte
		}
		defer func() {
			for _, s := range subs {
				f.leave(s.g, s.out)
			}
		}()
		out := make(chan []byte, 4096)
		parser := stomp.NewParser(stomp.Limits{})
		wsServe(w, r, "v12.stomp", out, func(_ net.Conn, p []byte) {
			parser.Feed(p)
			for {
				fr, ok, err := parser.Next()
				if err != nil || !ok {
					return
				}
				switch fr.Command {
				case stomp.CmdConnect, stomp.CmdStomp:
					out <- []byte("CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00")
				case stomp.CmdSubscribe:
					dest, _ := fr.Get("destination")
					id, _ := fr.Get("id")
					ch := f.join(dest)
					subs = append(subs, struct {
						g   string
						out chan []byte
					}{dest, ch})
					go func() {
						for m := range ch {
							out <- []byte("MESSAGE\ndestination:" + dest + "\nsubscription:" + id + "\ncontent-type:application/json\ncontent-length:" + strconv.Itoa(len(m)) + "\n\n" + string(m) + "\x00")
						}
					}()
				case stomp.CmdSend:
					dest, _ := fr.Get("destination")
					g := dest[len("/pub/location/"):]
					f.send("/sub/location/"+g, append([]byte(nil), fr.Body...))
				}
			}
		})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// authedEnvelopeServer is wsEnvelopeServer behind what a team's gateway checks: ?client=bench,
// a Bearer JWT (HS256 with secret) whose group claim is the group asked for, a session cookie
// naming the token's subject, and the subprotocol loc.v1. Anything else gets 401.
func authedEnvelopeServer(t *testing.T, secret string) *httptest.Server {
	f := newFanout()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/location", func(w http.ResponseWriter, r *http.Request) {
		g := r.URL.Query().Get("group")
		if err := checkGateway(r, secret, g); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		out := f.join(g)
		defer f.leave(g, out)
		wsServe(w, r, "loc.v1", out, func(_ net.Conn, p []byte) {
			f.send(g, []byte(`{"type":"LOCATION","payload":`+string(p)+`}`))
		})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func checkGateway(r *http.Request, secret, group string) error {
	if r.URL.Query().Get("client") != "bench" {
		return fmt.Errorf("no client=bench")
	}
	claims := jwt.MapClaims{}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return []byte(secret), nil }); err != nil {
		return err
	}
	sub, _ := claims.GetSubject()
	if c, err := r.Cookie("session"); err != nil || c.Value != "s-"+sub || !strings.HasPrefix(sub, "user-") {
		return fmt.Errorf("session cookie does not name %q", sub)
	}
	if fmt.Sprint(claims["group"]) != group {
		return fmt.Errorf("token for group %v, asked %s", claims["group"], group)
	}
	return nil
}

// refusing wraps h so that every every-th request (a stream, a poll, a publish, a WebSocket
// handshake) is answered 503.
func refusing(every int64) func(http.Handler) http.Handler {
	var n atomic.Int64
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1)%every == 0 {
				http.Error(w, `{"error":"busy"}`, http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}
