package k6export

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/target"
)

// The profile as the scripts read it (P in config.js): templates as written, paths as text.
type (
	jsProfile struct {
		Users      []string               `json:"users"`
		Tokens     []string               `json:"tokens,omitempty"`
		Transports map[string]jsTransport `json:"transports"`
	}
	jsTransport struct {
		URL          string      `json:"url"`
		Headers      [][2]string `json:"headers,omitempty"`
		Cookies      [][2]string `json:"cookies,omitempty"`
		Query        [][2]string `json:"query,omitempty"`
		Subprotocols []string    `json:"subprotocols,omitempty"`
		Connect      [][2]string `json:"connect,omitempty"`
		IntervalMs   int64       `json:"intervalMs,omitempty"`
		Lines        bool        `json:"lines,omitempty"`
		Ping         string      `json:"ping,omitempty"`
		Pong         string      `json:"pong,omitempty"`
		Subscribe    jsSubscribe `json:"subscribe"`
		Publish      jsPublish   `json:"publish"`
		Read         jsRead      `json:"read"`
	}
	jsSubscribe struct {
		Send        []string    `json:"send,omitempty"`
		Destination string      `json:"destination,omitempty"`
		Headers     [][2]string `json:"headers,omitempty"`
		URL         string      `json:"url,omitempty"`
		Ready       jsReady     `json:"ready"`
	}
	jsReady struct {
		Kind    string    `json:"kind"`
		DelayMs int64     `json:"delayMs,omitempty"`
		Status  int       `json:"status,omitempty"`
		Match   []jsMatch `json:"match,omitempty"`
	}
	jsPublish struct {
		Method      string      `json:"method,omitempty"`
		URL         string      `json:"url,omitempty"`
		Headers     [][2]string `json:"headers,omitempty"`
		Body        string      `json:"body,omitempty"`
		Destination string      `json:"destination,omitempty"`
		Ack         string      `json:"ack"`
		Status      int         `json:"status,omitempty"`
	}
	jsRead struct {
		Items  string         `json:"items,omitempty"`
		Cursor string         `json:"cursor,omitempty"`
		Match  []jsMatch      `json:"match,omitempty"`
		Regex  string         `json:"regex,omitempty"`
		Groups map[string]int `json:"groups,omitempty"`
		VU     string         `json:"vu,omitempty"`
		Seq    string         `json:"seq,omitempty"`
		TS     string         `json:"ts,omitempty"`
		TSUnit int64          `json:"tsUnit"`
	}
	jsMatch struct {
		Path    string `json:"path"`
		Value   string `json:"value,omitempty"`
		Present bool   `json:"present,omitempty"`
	}
)

// WriteProfile is Write for a --profile: the same workload, each user connecting, subscribing,
// publishing and reading as profile p says, with every user's {user} and {token} fixed at export
// (a minted token lives for the profile's ttl from now).
func WriteProfile(dir string, o *bench.Options, p *target.Profile, peak int, command string) (written, skipped []string, err error) {
	jp := jsProfile{Transports: map[string]jsTransport{}}
	now := time.Now()
	groups := o.WorkloadFor(peak).Groups
	for i := range peak {
		name := p.User.Render(&target.Values{VU: i, Group: i % groups})
		tok, err := p.Auth.Token(i, i%groups, name, now)
		if err != nil {
			return nil, nil, fmt.Errorf("k6 export: %w", err)
		}
		jp.Users = append(jp.Users, name)
		if p.Auth != nil {
			jp.Tokens = append(jp.Tokens, tok)
		}
	}
	var scripts []string
	for _, t := range o.Transports {
		// The same as for rtlab: k6 has no streaming HTTP (SSE), raw TCP or SockJS client.
		if !slices.Contains(Speakable(), t) || p.Transports[t] == nil {
			skipped = append(skipped, t)
			continue
		}
		jp.Transports[t] = jsTransportOf(p.Transports[t])
		scripts = append(scripts, t)
	}
	if len(scripts) == 0 {
		return nil, skipped, fmt.Errorf("--export-k6: none of %s is a transport k6 can speak for a profile (%s)", strings.Join(o.Transports, ", "), strings.Join(Speakable(), ", "))
	}
	js, err := json.Marshal(jp)
	if err != nil {
		return nil, nil, fmt.Errorf("k6 export: profile: %w", err)
	}
	ex := export{dir: dir, o: o, peak: peak, command: command, scripts: scripts, skipped: skipped, dirJS: "js/profile/",
		extraConfig: fmt.Appendf(nil, "// The profile %s: its routes, frames and paths; every user's name and token.\nexport const P = %s;\n", p.File, js),
		extraJS:     []string{"profile.js", "poll.js"},
		note:        fmt.Sprintf("The routes, frames and messages are the profile %s's, sent and read as rtlab bench does.", p.File)}
	return ex.write()
}

func jsTransportOf(t *target.Transport) jsTransport {
	s, pub, r := &t.Subscribe, &t.Publish, &t.Read
	jt := jsTransport{
		URL: t.URL.String(), Headers: pairs(t.Headers), Cookies: pairs(t.Cookies), Query: pairs(t.Query),
		Subprotocols: t.Subprotocols, Connect: pairs(t.Connect), IntervalMs: t.Interval.Milliseconds(),
		Lines: t.Lines, Ping: t.Ping, Pong: t.Pong,
		Subscribe: jsSubscribe{Destination: s.Destination.String(), Headers: pairs(s.Headers), URL: s.URL.String(),
			Ready: jsReady{Kind: s.Ready.Kind, DelayMs: s.Ready.Delay.Milliseconds(), Status: s.Ready.Status, Match: matches(s.Ready.Match)}},
		Publish: jsPublish{Method: pub.Method, URL: pub.URL.String(), Headers: pairs(pub.Headers), Body: pub.Body.String(),
			Destination: pub.Destination.String(), Ack: pub.Ack, Status: pub.Status},
		Read: jsRead{Items: r.Items.String(), Cursor: r.Cursor.String(), Match: matches(r.Match),
			VU: r.VU.String(), Seq: r.Seq.String(), TS: r.TS.String(), TSUnit: r.TSUnit},
	}
	for _, f := range s.Send {
		jt.Subscribe.Send = append(jt.Subscribe.Send, f.String())
	}
	if r.Regex != nil {
		jt.Read.Regex, jt.Read.Groups = jsRegex(r.Regex)
	}
	return jt
}

// goGroup is a named group's opening in Go's syntax.
var goGroup = regexp.MustCompile(`\(\?P?<[A-Za-z_][A-Za-z0-9_]*>`)

// jsRegex is re for JavaScript: named groups become plain ones (numbered as before), and the
// numbers of vu, seq and ts.
func jsRegex(re *regexp.Regexp) (string, map[string]int) {
	groups := map[string]int{}
	for i, n := range re.SubexpNames() {
		if n == "vu" || n == "seq" || n == "ts" {
			groups[n] = i
		}
	}
	return goGroup.ReplaceAllString(re.String(), "("), groups
}

func pairs(hs []target.Header) [][2]string {
	var out [][2]string
	for _, h := range hs {
		out = append(out, [2]string{h.Name, h.Value.String()})
	}
	return out
}

func matches(ms []target.Match) []jsMatch {
	var out []jsMatch
	for _, m := range ms {
		out = append(out, jsMatch{Path: m.Path.String(), Value: m.Value, Present: m.Present})
	}
	return out
}
