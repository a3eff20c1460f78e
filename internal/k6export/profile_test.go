package k6export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/bench"
)

// TestWriteProfile checks a profile's export: its transports k6 speaks, SSE left out, every
// user's name and token in config.js, a Go regex's named groups numbered for JavaScript; and
// a profile with nothing k6 speaks refused.
func TestWriteProfile(t *testing.T) {
	const src = `user: 'k6-{vu}'
auth: {jwt: {secret: s}}
transports:
  ws:
    url: /ws?g={group}
    publish: {body: 'vu={vu} seq={seq} ts={ts_ms}', ack: echo}
    read: {regex: '(x)? vu=(?P<vu>\d+) seq=(?P<seq>\d+) ts=(?P<ts>[0-9.]+)', ts_unit: ms}
  sse:
    url: /sse
    publish: {url: /pub}
    read: {vu: $.vu, seq: $.seq}
`
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &bench.Options{Target: "http://127.0.0.1:1", Profile: file, Users: []int{4}, Stages: "2s:PEAK", Groups: 2}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := bench.LoadProfile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	written, skipped, err := WriteProfile(dir, o, p, 4, "x")
	if err != nil || strings.Join(written, ",") != "ws.js" || strings.Join(skipped, ",") != "sse" {
		t.Fatalf("written %v, skipped %v, %v", written, skipped, err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.js"))
	for _, want := range []string{`"users":["k6-0","k6-1","k6-2","k6-3"]`, `"tokens":["ey`, `"regex":"(x)? vu=(\\d+) seq=(\\d+) ts=([0-9.]+)"`,
		`"groups":{"seq":3,"ts":4,"vu":2}`, `"tsUnit":1000000`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.js lacks %s:\n%s", want, cfg)
		}
	}
	for _, f := range []string{"lib.js", "profile.js", "poll.js", "ws.js", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	o.Transports = []string{"sse"}
	if _, _, err := WriteProfile(t.TempDir(), o, p, 4, "x"); err == nil || !strings.Contains(err.Error(), "k6 can speak") {
		t.Errorf("an SSE-only export: %v", err)
	}
}
