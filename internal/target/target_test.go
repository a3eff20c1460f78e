package target

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestExamplesParse(t *testing.T) {
	t.Setenv("CENTRIFUGO_CLIENT_TOKEN_HMAC_SECRET_KEY", "s") // builtin:centrifugo's secret
	files, _ := filepath.Glob("../../examples/targets/*.yaml")
	more, _ := filepath.Glob("../bench/profiles/*.yaml")
	files = append(files, more...)
	if len(files) < 6 {
		t.Fatalf("found %d profiles", len(files))
	}
	for _, f := range files {
		p, err := ParseFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(p.Names()) == 0 {
			t.Errorf("%s: no transports", f)
		}
	}
}

func TestErrorsNameLineAndField(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"transports:\n  sse:\n    url: /s\n    publish: {url: /p}\n    read:\n      vu: $.vu\n      seq: payload.seq\n", "p.yaml:7: transports.sse.read.seq: want a path like $.payload.seq"},
		{"transports:\n  ws:\n    url: /ws\n    publish: {body: x}\n    read: {vu: $.a, seq: $.b}\n    bogus: 1\n", "p.yaml:6: transports.ws.bogus: unknown field"},
		{"transports:\n  ws:\n    url: /ws?g={grp}\n", "p.yaml:3: transports.ws.url: unknown placeholder {grp}"},
		{"transports:\n  stomp:\n    url: /s\n    read: {vu: $.a, seq: $.b}\n", "p.yaml:3: transports.stomp.subscribe.destination: missing"},
		{"transports:\n  sse:\n    url: /s\n    read: {vu: $.a, seq: $.b}\n", "p.yaml:3: transports.sse.publish.url: missing"},
		{"transports:\n  ws:\n    url: /ws\n    subscribe: {ready: soon}\n", "p.yaml:4: transports.ws.subscribe.ready: want open, receipt"},
		{"auth:\n  jwt: {secret: s, alg: RS256}\ntransports: {}\n", "p.yaml:2: auth.jwt.alg: only HS256"},
		{"transports:\n  ws:\n    url: /ws\n    publish: {body: x}\n    read: {vu: $.a, seq: $.b, ts_unit: h}\n", "p.yaml:5: transports.ws.read.ts_unit: want ns, us, ms or s"},
		{"transports:\n  ws:\n    url: /ws\n    pong: {ping: '{}'}\n", "p.yaml:4: transports.ws.pong: want {ping:"},
		{"transports:\n  ws:\n    url: /ws\n    lines: often\n", "p.yaml:4: transports.ws.lines: want true or false"},
		{"transports:\n  sse:\n    url: /s\n    lines: true\n", "p.yaml:4: transports.sse.lines: unknown field"},
	} {
		_, err := Parse("p.yaml", ".", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}

// TestMatchPresent checks that a match with no value (~) holds whenever the path is there.
func TestMatchPresent(t *testing.T) {
	src := "transports:\n  ws:\n    url: /ws\n    publish: {body: x}\n    read: {match: {$.push.pub: ~, $.push.channel: a}, vu: $.a, seq: $.b}\n"
	p, err := Parse("p.yaml", ".", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r := &p.Transports["ws"].Read
	for msg, want := range map[string]bool{
		`{"push":{"channel":"a","pub":{"data":1}}}`: true,
		`{"push":{"channel":"a","pub":null}}`:       true,
		`{"push":{"channel":"a"}}`:                  false,
		`{"push":{"channel":"b","pub":{}}}`:         false,
	} {
		if r.Matches([]byte(msg)) != want {
			t.Errorf("%s: matches %v, want %v", msg, !want, want)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Setenv("RTLAB_T", "tok")
	tm, err := ParseTemplate(`{"userId":{vu},"x":{seq},"y":{ts_ms},"u":"{user}","k":"${RTLAB_T}","z":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	got := tm.Render(&Values{VU: 7, Seq: 3, TS: 1764355200123456789, User: "u7"})
	want := `{"userId":7,"x":3,"y":1764355200123.456789,"u":"u7","k":"tok","z":{}}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if _, err := ParseTemplate("${RTLAB_UNSET_VAR}"); err == nil {
		t.Fatal("an unset variable was accepted")
	}
}

func TestExtract(t *testing.T) {
	r := Read{TSUnit: 1e6}
	r.VU, _ = ParsePath("$.p.users[1].id")
	r.Seq, _ = ParsePath("$.p.seq")
	r.TS, _ = ParsePath("$.p.ts")
	f, err := r.Extract([]byte(`{"t":"L","p":{"users":[{"id":1},{"id":"12"}],"seq":3.0,"ts":1.764355200123456E12}}`))
	if err != nil || f.VU != 12 || f.Seq != 3 || f.TS/1000 != 1764355200123456 {
		t.Fatalf("%+v %v", f, err)
	}
	_, err = r.Extract([]byte(`{"p":{"users":[{},{"id":1}]}}`))
	if err == nil || !strings.Contains(err.Error(), "field $.p.seq missing in: {") {
		t.Fatalf("got %v", err)
	}
	if _, err := r.Extract([]byte(`{"p":{"users":[{},{"id":1}],"seq":2.5,"ts":1}}`)); err == nil {
		t.Fatal("a fractional seq was accepted")
	}
}

func TestAuth(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("a\nb\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "auth: {tokens_file: tokens.txt}\ntransports:\n  ws: {url: /ws, publish: {body: x}, read: {vu: $.a, seq: $.b}}\n"
	p, err := Parse("p.yaml", dir, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := p.Auth.Token(3, 0, "u3", time.Now()); tok != "b" {
		t.Fatalf("token %q", tok)
	}
	t.Setenv("RTLAB_JWT", "sekrit")
	src = "auth: {jwt: {secret_env: RTLAB_JWT, claims: {sub: '{user}', room: 'g{group}'}}}\ntransports:\n  ws: {url: /ws, publish: {body: x}, read: {vu: $.a, seq: $.b}}\n"
	if p, err = Parse("p.yaml", dir, []byte(src)); err != nil {
		t.Fatal(err)
	}
	tok, err := p.Auth.Token(3, 2, "u3", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return []byte("sekrit"), nil }); err != nil {
		t.Fatal(err)
	}
	if claims["sub"] != "u3" || claims["room"] != "g2" {
		t.Fatalf("claims %v", claims)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{`{"a":{vu}}`, "{ts_ms}{", "{}{x}", "${", "a${B}c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTemplate(s)
		if err == nil {
			_ = tm.Render(&Values{VU: 1, Seq: 2, TS: 3})
		}
	})
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"$", "$.a.b", "$.a[0].b", "$[", "$.[1]"} {
		f.Add(s, `{"a":[{"b":1}]}`)
	}
	f.Fuzz(func(t *testing.T, path, doc string) {
		p, err := ParsePath(path)
		if err != nil {
			return
		}
		_, _ = p.Lookup([]byte(doc))
		_ = p.Each([]byte(doc), func([]byte) error { return nil })
	})
}

func FuzzParseProfile(f *testing.F) {
	b, _ := os.ReadFile("../../examples/targets/ws-envelope.yaml")
	f.Add(string(b))
	f.Add("transports: {sse: {url: /s}}")
	f.Fuzz(func(t *testing.T, src string) {
		_, _ = Parse("f.yaml", t.TempDir(), []byte(src))
	})
}

func TestSocketIOSection(t *testing.T) {
	src := `transports:
  socketio:
    path: /socket.io/
    namespace: /loc
    join: {event: join, data: '{"room":"g{group}"}'}
    publish: {event: location, data: '{"vu":{vu},"seq":{seq},"ts":{ts}}'}
    receive: {event: location}
    read: {vu: $.vu, seq: $.seq, ts: $.ts}
`
	p, err := Parse("p.yaml", ".", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := p.SocketIO
	if s == nil || s.Namespace != "/loc" || s.JoinEvent != "join" || s.PubEvent != "location" || s.RecvEvent != "location" || s.Read.Seq.String() != "$.seq" {
		t.Fatalf("%+v", s)
	}
	if got := p.Names(); len(got) != 1 || got[0] != "socketio" {
		t.Fatalf("names %v", got)
	}
	if s.Transport != SIOUpgrade || s.JoinReady.Kind != ReadyAck || s.PubAck != AckNone {
		t.Fatalf("defaults: transport %q, join ready %q, publish ack %q", s.Transport, s.JoinReady.Kind, s.PubAck)
	}
	_, err = Parse("p.yaml", ".", []byte(strings.Replace(src, "path: /socket.io/", "transport: grpc", 1)))
	if err == nil || !strings.Contains(err.Error(), `p.yaml:3: transports.socketio.transport: want upgrade (polling, then WebSocket), polling or websocket, not "grpc"`) {
		t.Fatalf("got %v", err)
	}
	_, err = Parse("p.yaml", ".", []byte(strings.Replace(src, "    receive: {event: location}\n", "", 1)))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:3: transports.socketio.receive.event: missing") {
		t.Fatalf("got %v", err)
	}
}
