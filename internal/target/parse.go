package target

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rtlab/rtlab/internal/transports"
)

// ParseFile reads and validates the profile at path.
func ParseFile(path string) (*Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading profile: %w", err)
	}
	return Parse(filepath.Base(path), filepath.Dir(path), b)
}

// Parse validates the profile src; name names it in errors, and dir is where its relative
// files (auth.tokens_file) are. Every error names the line and the field:
// "profile.yaml:12: transports.sse.read.seq: want a path like $.payload.seq".
func Parse(name, dir string, src []byte) (*Profile, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	w := &walker{file: name, dir: dir}
	p := &Profile{File: name, Transports: map[string]*Transport{}}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty profile; want a transports: section", name)
	}
	doc := root.Content[0]
	err := w.fields(doc, "", map[string]func(*yaml.Node, string) error{
		"user": func(n *yaml.Node, at string) (err error) { p.User, err = w.tmpl(n, at); return err },
		"auth": func(n *yaml.Node, at string) (err error) { p.Auth, err = w.auth(n, at); return err },
		"transports": func(n *yaml.Node, at string) error {
			return w.transports(n, at, p)
		},
	})
	if err != nil {
		return nil, err
	}
	if len(p.Transports) == 0 && p.SocketIO == nil {
		return nil, w.errf(doc, "transports", "missing; want at least one of %s", strings.Join(Transports(), ", "))
	}
	if p.User == nil {
		p.User, _ = ParseTemplate("u{vu}")
	}
	if p.User.Uses(VarUser) || p.User.Uses(VarToken) || p.User.Uses(VarSeq) {
		return nil, fmt.Errorf("%s: user: may use {vu} and {group} only", name)
	}
	return p, nil
}

type walker struct{ file, dir string }

func (w *walker) errf(n *yaml.Node, at, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", w.file, n.Line, strings.TrimPrefix(at, "."), fmt.Sprintf(format, args...))
}

// fields walks a mapping, handing each key to its handler; an unknown key is an error.
func (w *walker) fields(n *yaml.Node, at string, h map[string]func(*yaml.Node, string) error) error {
	if n.Kind != yaml.MappingNode {
		return w.errf(n, nonEmpty(at, "profile"), "want a mapping")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fn, ok := h[k.Value]
		if !ok {
			keys := make([]string, 0, len(h))
			for key := range h {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			return w.errf(k, at+"."+k.Value, "unknown field; want one of %s", strings.Join(keys, ", "))
		}
		if err := fn(v, at+"."+k.Value); err != nil {
			return err
		}
	}
	return nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (w *walker) str(n *yaml.Node, at string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", w.errf(n, at, "want a single value")
	}
	return n.Value, nil
}

func (w *walker) tmpl(n *yaml.Node, at string) (*Template, error) {
	s, err := w.str(n, at)
	if err != nil {
		return nil, err
	}
	t, err := ParseTemplate(s)
	if err != nil {
		return nil, w.errf(n, at, "%v", err)
	}
	return t, nil
}

func (w *walker) path(n *yaml.Node, at string) (*Path, error) {
	s, err := w.str(n, at)
	if err != nil {
		return nil, err
	}
	p, err := ParsePath(s)
	if err != nil {
		return nil, w.errf(n, at, "want a path like $.payload.seq, not %q", s)
	}
	return p, nil
}

func (w *walker) dur(n *yaml.Node, at string) (time.Duration, error) {
	s, err := w.str(n, at)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > time.Hour {
		return 0, w.errf(n, at, "want a duration like 500ms or 2s, not %q", s)
	}
	return d, nil
}

func (w *walker) status(n *yaml.Node, at string) (int, error) {
	s, err := w.str(n, at)
	if err != nil {
		return 0, err
	}
	c, err := strconv.Atoi(s)
	if err != nil || c < 100 || c > 599 {
		return 0, w.errf(n, at, "want an HTTP status like 200, not %q", s)
	}
	return c, nil
}

// headers reads a mapping of names to templates, in the file's order.
func (w *walker) headers(n *yaml.Node, at string) ([]Header, error) {
	if n.Kind != yaml.MappingNode {
		return nil, w.errf(n, at, "want a mapping of names to values")
	}
	var out []Header
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if k == "" || strings.ContainsAny(k, ":\r\n \x00") {
			return nil, w.errf(n.Content[i], at, "bad name %q", k)
		}
		t, err := w.tmpl(n.Content[i+1], at+"."+k)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(t.String(), "\r\n\x00") {
			return nil, w.errf(n.Content[i+1], at+"."+k, "a value may not hold a line break")
		}
		out = append(out, Header{Name: k, Value: t})
	}
	return out, nil
}

func (w *walker) strings(n *yaml.Node, at string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, w.errf(n, at, "want a list")
	}
	var out []string
	for _, e := range n.Content {
		s, err := w.str(e, at)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// matches reads a mapping of paths to the values they must hold.
func (w *walker) matches(n *yaml.Node, at string) ([]Match, error) {
	if n.Kind == yaml.ScalarNode && n.Value == "" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, w.errf(n, at, `want a mapping of paths to values, like {$.type: LOCATION} ({$.a: ~}: present)`)
	}
	var out []Match
	for i := 0; i+1 < len(n.Content); i += 2 {
		p, err := w.path(n.Content[i], at)
		if err != nil {
			return nil, err
		}
		vn := n.Content[i+1]
		if vn.Tag == "!!null" { // {$.push.pub: ~}: any value will do
			out = append(out, Match{Path: p, Present: true})
			continue
		}
		v, err := w.str(vn, at+"."+n.Content[i].Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Match{Path: p, Value: v})
	}
	return out, nil
}

func (w *walker) transports(n *yaml.Node, at string, p *Profile) error {
	h := map[string]func(*yaml.Node, string) error{}
	for _, name := range Transports() {
		h[name] = func(v *yaml.Node, at string) error {
			if name == SocketIOName {
				s, err := w.socketIO(v, at)
				p.SocketIO = s
				return err
			}
			t, err := w.transport(v, at, name)
			p.Transports[name] = t
			return err
		}
	}
	return w.fields(n, at, h)
}

// pong reads {ping: TEXT, send: TEXT}: the server's application-level ping and the answer.
func (w *walker) pong(n *yaml.Node, at string, t *Transport) error {
	err := w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"ping": func(v *yaml.Node, at string) (err error) { t.Ping, err = w.str(v, at); return err },
		"send": func(v *yaml.Node, at string) (err error) { t.Pong, err = w.str(v, at); return err },
	})
	if err == nil && (t.Ping == "" || t.Pong == "") {
		return w.errf(n, at, "want {ping: '{}', send: '{}'}: the server's ping message and the answer")
	}
	return err
}

func (w *walker) boolean(n *yaml.Node, at string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, w.errf(n, at, "want true or false")
	}
	return b, nil
}

func isSTOMP(name string) bool { return name == "stomp" || name == "stomp-tcp" || name == "sockjs" }

func (w *walker) transport(n *yaml.Node, at, name string) (*Transport, error) {
	t := &Transport{Name: name}
	h := map[string]func(*yaml.Node, string) error{
		"url":          func(v *yaml.Node, at string) (err error) { t.URL, err = w.tmpl(v, at); return err },
		"headers":      func(v *yaml.Node, at string) (err error) { t.Headers, err = w.headers(v, at); return err },
		"cookies":      func(v *yaml.Node, at string) (err error) { t.Cookies, err = w.headers(v, at); return err },
		"query":        func(v *yaml.Node, at string) (err error) { t.Query, err = w.headers(v, at); return err },
		"subprotocols": func(v *yaml.Node, at string) (err error) { t.Subprotocols, err = w.strings(v, at); return err },
		"subscribe":    func(v *yaml.Node, at string) error { return w.subscribe(v, at, t) },
		"publish":      func(v *yaml.Node, at string) error { return w.publish(v, at, t) },
		"read":         func(v *yaml.Node, at string) (err error) { t.Read, err = w.read(v, at, name); return err },
	}
	if name == transports.WS {
		h["lines"] = func(v *yaml.Node, at string) (err error) { t.Lines, err = w.boolean(v, at); return err }
		h["pong"] = func(v *yaml.Node, at string) error { return w.pong(v, at, t) }
	}
	if name == "shortpoll" {
		h["interval"] = func(v *yaml.Node, at string) (err error) { t.Interval, err = w.dur(v, at); return err }
	}
	if isSTOMP(name) {
		h["connect"] = func(v *yaml.Node, at string) error {
			return w.fields(v, at, map[string]func(*yaml.Node, string) error{
				"headers": func(v *yaml.Node, at string) (err error) { t.Connect, err = w.headers(v, at); return err },
			})
		}
	}
	if err := w.fields(n, at, h); err != nil {
		return nil, err
	}
	return t, w.checkTransport(n, at, t)
}

// checkTransport checks what a transport cannot do without, and fills defaults.
func (w *walker) checkTransport(n *yaml.Node, at string, t *Transport) error {
	if t.URL == nil && t.Name != "stomp-tcp" {
		return w.errf(n, at+".url", "missing; want the route, like /ws?group={group}")
	}
	if t.URL != nil && t.Name != "stomp-tcp" && !strings.HasPrefix(t.URL.String(), "/") {
		return w.errf(n, at+".url", "want a path on the target starting with /, not %q", t.URL)
	}
	if t.Read.VU == nil && t.Read.Regex == nil {
		return w.errf(n, at+".read", "missing; say where the bench's fields are, like {vu: $.vu, seq: $.seq, ts: $.ts}")
	}
	if isSTOMP(t.Name) {
		if t.Subscribe.Destination == nil {
			return w.errf(n, at+".subscribe.destination", "missing; want a destination like /topic/location.{group}")
		}
		if t.Publish.Destination == nil {
			return w.errf(n, at+".publish.destination", "missing; want a destination like /app/location/{group}")
		}
	} else if t.Name != "ws" && !t.Publish.HTTP() {
		return w.errf(n, at+".publish.url", "missing; %s publishes with an HTTP request: want {method: POST, url: /share?group={group}, body: ...}", t.Name)
	}
	if t.Name == "ws" && !t.Publish.HTTP() && t.Publish.Body == nil {
		return w.errf(n, at+".publish.body", "missing; want the frame a user sends, with {vu} {seq} {ts}")
	}
	return w.fillDefaults(n, at, t)
}

func (w *walker) fillDefaults(n *yaml.Node, at string, t *Transport) error {
	pub := &t.Publish
	if pub.Ack == "" {
		switch {
		case pub.HTTP():
			pub.Ack = AckStatus
		case isSTOMP(t.Name):
			pub.Ack = AckReceipt
		default:
			pub.Ack = AckNone
		}
	}
	if pub.HTTP() && pub.Method == "" {
		pub.Method = "POST"
	}
	if pub.Ack == AckReceipt && !isSTOMP(t.Name) {
		return w.errf(n, at+".publish.ack", "receipt is STOMP's; want status, reply, echo or none")
	}
	if pub.Ack == AckStatus && !pub.HTTP() {
		return w.errf(n, at+".publish.ack", "status answers an HTTP publish; want receipt, reply, echo or none")
	}
	if t.Subscribe.URL != nil && (t.Read.Cursor == nil || (t.Name != "longpoll" && t.Name != "shortpoll")) {
		return w.errf(n, at+".subscribe.url", "is the first poll, which reads read.cursor: give read.cursor, on longpoll or shortpoll")
	}
	r := &t.Subscribe.Ready
	if r.Kind == "" {
		r.Kind = ReadyOpen
		if isSTOMP(t.Name) {
			r.Kind = ReadyReceipt
		}
	}
	if r.Kind == ReadyReceipt && !isSTOMP(t.Name) {
		return w.errf(n, at+".subscribe.ready", "receipt is STOMP's; want open, message or a delay")
	}
	if t.Read.TSUnit == 0 {
		t.Read.TSUnit = 1
	}
	return nil
}

func (w *walker) subscribe(n *yaml.Node, at string, t *Transport) error {
	s := &t.Subscribe
	return w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"send": func(v *yaml.Node, at string) error {
			frames, err := w.strings(v, at)
			for _, f := range frames {
				tm, terr := ParseTemplate(f)
				if terr != nil {
					return w.errf(v, at, "%v", terr)
				}
				s.Send = append(s.Send, tm)
			}
			return err
		},
		"destination": func(v *yaml.Node, at string) (err error) { s.Destination, err = w.tmpl(v, at); return err },
		"url":         func(v *yaml.Node, at string) (err error) { s.URL, err = w.tmpl(v, at); return err },
		"headers":     func(v *yaml.Node, at string) (err error) { s.Headers, err = w.headers(v, at); return err },
		"ready":       func(v *yaml.Node, at string) (err error) { s.Ready, err = w.ready(v, at); return err },
	})
}

// ready reads open, receipt, message, a delay (500ms), or {message: {path: value}} or
// {status: 200}.
func (w *walker) ready(n *yaml.Node, at string) (Ready, error) {
	var r Ready
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case ReadyOpen, ReadyReceipt, ReadyMessage:
			r.Kind = n.Value
			return r, nil
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil || d < 0 || d > time.Minute {
			return r, w.errf(n, at, "want open, receipt, message, a delay like 500ms, or {message: {$.type: JOINED}} or {status: 200}")
		}
		r.Kind, r.Delay = ReadyDelay, d
		return r, nil
	}
	err := w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"message": func(v *yaml.Node, at string) (err error) {
			r.Kind = ReadyMessage
			r.Match, err = w.matches(v, at)
			return err
		},
		"status": func(v *yaml.Node, at string) (err error) {
			r.Kind = nonEmpty(r.Kind, ReadyOpen)
			r.Status, err = w.status(v, at)
			return err
		},
		"delay": func(v *yaml.Node, at string) (err error) {
			r.Kind = ReadyDelay
			r.Delay, err = w.dur(v, at)
			return err
		},
	})
	return r, err
}

func (w *walker) publish(n *yaml.Node, at string, t *Transport) error {
	p := &t.Publish
	return w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"method": func(v *yaml.Node, at string) error {
			m, err := w.str(v, at)
			if err == nil && !slices.Contains([]string{"POST", "PUT", "PATCH", "GET"}, m) {
				return w.errf(v, at, "want POST, PUT, PATCH or GET, not %q", m)
			}
			p.Method = m
			return err
		},
		"url":         func(v *yaml.Node, at string) (err error) { p.URL, err = w.tmpl(v, at); return err },
		"headers":     func(v *yaml.Node, at string) (err error) { p.Headers, err = w.headers(v, at); return err },
		"body":        func(v *yaml.Node, at string) (err error) { p.Body, err = w.tmpl(v, at); return err },
		"destination": func(v *yaml.Node, at string) (err error) { p.Destination, err = w.tmpl(v, at); return err },
		"status":      func(v *yaml.Node, at string) (err error) { p.Status, err = w.status(v, at); return err },
		"ack":         func(v *yaml.Node, at string) error { return w.ack(v, at, p) },
	})
}

// ack reads status, receipt, echo, none, or {reply: {match: {...}, seq: $.id}}.
func (w *walker) ack(n *yaml.Node, at string, p *Publish) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case AckStatus, AckReceipt, AckEcho, AckNone:
			p.Ack = n.Value
			return nil
		}
		return w.errf(n, at, "want status, receipt, echo, none or {reply: {match: {...}, seq: $.id}}, not %q", n.Value)
	}
	p.Ack = AckReply
	return w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"reply": func(v *yaml.Node, at string) error {
			err := w.fields(v, at, map[string]func(*yaml.Node, string) error{
				"match": func(v *yaml.Node, at string) (err error) { p.ReplyMatch, err = w.matches(v, at); return err },
				"seq":   func(v *yaml.Node, at string) (err error) { p.ReplySeq, err = w.path(v, at); return err },
			})
			if err == nil && p.ReplySeq == nil {
				return w.errf(v, at+".seq", "missing; want the path of the publication's {seq} in the reply")
			}
			return err
		},
	})
}

var units = map[string]int64{"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}

func (w *walker) read(n *yaml.Node, at, transport string) (Read, error) {
	var r Read
	h := map[string]func(*yaml.Node, string) error{
		"match": func(v *yaml.Node, at string) (err error) { r.Match, err = w.matches(v, at); return err },
		"vu":    func(v *yaml.Node, at string) (err error) { r.VU, err = w.path(v, at); return err },
		"seq":   func(v *yaml.Node, at string) (err error) { r.Seq, err = w.path(v, at); return err },
		"ts":    func(v *yaml.Node, at string) (err error) { r.TS, err = w.path(v, at); return err },
		"ts_unit": func(v *yaml.Node, at string) error {
			u, ok := units[v.Value]
			if !ok {
				return w.errf(v, at, "want ns, us, ms or s, not %q", v.Value)
			}
			r.TSUnit = u
			return nil
		},
		"regex": func(v *yaml.Node, at string) (err error) { r.Regex, err = w.regex(v, at); return err },
	}
	switch transport {
	case transports.SSE:
		h["event"] = func(v *yaml.Node, at string) (err error) { r.Event, err = w.str(v, at); return err }
	case transports.LongPoll, transports.ShortPoll:
		h["items"] = func(v *yaml.Node, at string) (err error) { r.Items, err = w.path(v, at); return err }
		h["cursor"] = func(v *yaml.Node, at string) (err error) { r.Cursor, err = w.path(v, at); return err }
	}
	if err := w.fields(n, at, h); err != nil {
		return r, err
	}
	if r.Regex != nil {
		if r.VU != nil || r.Seq != nil || r.TS != nil {
			return r, w.errf(n, at+".regex", "give regex or vu/seq/ts paths, not both")
		}
		return r, nil
	}
	if r.VU == nil {
		return r, w.errf(n, at+".vu", "missing; want a path like $.payload.vu")
	}
	if r.Seq == nil {
		return r, w.errf(n, at+".seq", "missing; want a path like $.payload.seq")
	}
	return r, nil
}

func (w *walker) regex(n *yaml.Node, at string) (*regexp.Regexp, error) {
	s, err := w.str(n, at)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, w.errf(n, at, "%v", err)
	}
	if vu, seq := regexGroups(re); !vu || !seq {
		return nil, w.errf(n, at, "want named groups vu and seq (and ts), like vu=(?P<vu>\\d+) seq=(?P<seq>\\d+)")
	}
	return re, nil
}

func (w *walker) socketIO(n *yaml.Node, at string) (*SocketIO, error) {
	s := &SocketIO{Transport: SIOUpgrade, Path: "/socket.io/", Namespace: "/"}
	err := w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"transport": func(v *yaml.Node, at string) (err error) {
			s.Transport, err = w.str(v, at)
			if err == nil && !slices.Contains([]string{SIOUpgrade, SIOPolling, SIOWebSocket}, s.Transport) {
				return w.errf(v, at, "want upgrade (polling, then WebSocket), polling or websocket, not %q", s.Transport)
			}
			return err
		},
		"path":      func(v *yaml.Node, at string) (err error) { s.Path, err = w.str(v, at); return err },
		"namespace": func(v *yaml.Node, at string) (err error) { s.Namespace, err = w.str(v, at); return err },
		"auth":      func(v *yaml.Node, at string) (err error) { s.Auth, err = w.tmpl(v, at); return err },
		"headers":   func(v *yaml.Node, at string) (err error) { s.Headers, err = w.headers(v, at); return err },
		"query":     func(v *yaml.Node, at string) (err error) { s.Query, err = w.headers(v, at); return err },
		"join":      func(v *yaml.Node, at string) error { return w.sioJoin(v, at, s) },
		"publish":   func(v *yaml.Node, at string) error { return w.sioPublish(v, at, s) },
		"receive": func(v *yaml.Node, at string) error {
			return w.fields(v, at, map[string]func(*yaml.Node, string) error{
				"event": func(v *yaml.Node, at string) (err error) { s.RecvEvent, err = w.str(v, at); return err },
			})
		},
		"read": func(v *yaml.Node, at string) (err error) { s.Read, err = w.read(v, at, "socketio"); return err },
	})
	if err != nil {
		return nil, err
	}
	return s, w.checkSocketIO(n, at, s)
}

func (w *walker) checkSocketIO(n *yaml.Node, at string, s *SocketIO) error {
	switch {
	case s.PubEvent == "" || s.PubData == nil:
		return w.errf(n, at+".publish", "missing; want {event: location, data: '{\"vu\":{vu},\"seq\":{seq},\"ts\":{ts}}'}")
	case s.RecvEvent == "":
		return w.errf(n, at+".receive.event", "missing; want the event deliveries arrive as")
	case s.Read.VU == nil && s.Read.Regex == nil:
		return w.errf(n, at+".read", "missing; say where the bench's fields are, like {vu: $.vu, seq: $.seq, ts: $.ts}")
	case s.JoinEvent == "" && s.JoinData != nil:
		return w.errf(n, at+".join.event", "missing; want the event that joins, like join")
	case s.JoinEvent == "" && s.JoinReady.Kind == ReadyAck:
		return w.errf(n, at+".join.ready", "ack needs join.event")
	}
	if s.JoinReady.Kind == "" {
		s.JoinReady.Kind = ReadyOpen
		if s.JoinEvent != "" {
			s.JoinReady.Kind = ReadyAck
		}
	}
	if s.PubAck == "" {
		s.PubAck = AckNone
	}
	if s.Read.TSUnit == 0 {
		s.Read.TSUnit = 1
	}
	return nil
}

// sioJoin reads {event, data, ready: ack | open | a delay}.
func (w *walker) sioJoin(n *yaml.Node, at string, s *SocketIO) error {
	return w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"event": func(v *yaml.Node, at string) (err error) { s.JoinEvent, err = w.str(v, at); return err },
		"data":  func(v *yaml.Node, at string) (err error) { s.JoinData, err = w.tmpl(v, at); return err },
		"ready": func(v *yaml.Node, at string) error {
			if v.Kind == yaml.ScalarNode && (v.Value == ReadyAck || v.Value == ReadyOpen) {
				s.JoinReady.Kind = v.Value
				return nil
			}
			d, err := w.dur(v, at)
			if err != nil {
				return w.errf(v, at, "want ack (the join event's acknowledgement), open, or a delay like 500ms")
			}
			s.JoinReady = Ready{Kind: ReadyDelay, Delay: d}
			return nil
		},
	})
}

// sioPublish reads {event, data, ack: ack | echo | none}.
func (w *walker) sioPublish(n *yaml.Node, at string, s *SocketIO) error {
	return w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"event": func(v *yaml.Node, at string) (err error) { s.PubEvent, err = w.str(v, at); return err },
		"data":  func(v *yaml.Node, at string) (err error) { s.PubData, err = w.tmpl(v, at); return err },
		"ack": func(v *yaml.Node, at string) (err error) {
			s.PubAck, err = w.str(v, at)
			if err == nil && !slices.Contains([]string{AckSocketIO, AckEcho, AckNone}, s.PubAck) {
				return w.errf(v, at, "want ack (the event's acknowledgement), echo or none, not %q", s.PubAck)
			}
			return err
		},
	})
}

// readLines reads a file of one value a line, blank lines left out.
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, string(l))
		}
	}
	return out, nil
}
