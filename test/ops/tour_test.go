package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/servertest"
)

// step is one `$ command` of the README and the output printed under it.
type step struct {
	cmd  string
	want []string
}

// readme is what the tour test reads of README.md.
type readme struct {
	startLine string // the "rtlab serving" line shown for make run
	tour      []step // "A quick tour", in order
	lab       []step // "The load lab"
	nodes     []string
}

// section returns the text of README's "## title" section.
func section(t *testing.T, text, title string) string {
	t.Helper()
	i := strings.Index(text, "\n## "+title+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", title)
	}
	rest := text[i+len(title)+5:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// codeBlocks returns the lines of each ``` block of text.
func codeBlocks(text string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				blocks = append(blocks, cur)
			}
			in, cur = !in, nil
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return blocks
}

// steps splits blocks into `$ command` steps and their outputs.
func steps(blocks [][]string) []step {
	var out []step
	for _, b := range blocks {
		in := false // lines before a block's first command are no output
		for _, line := range b {
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				out = append(out, step{cmd: cmd})
				in = true
			} else if in {
				out[len(out)-1].want = append(out[len(out)-1].want, line)
			}
		}
	}
	return out
}

func readREADME(t *testing.T) readme {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var r readme
	tour := codeBlocks(section(t, text, "A quick tour"))
	for _, b := range tour {
		for _, line := range b {
			if strings.Contains(line, `msg="rtlab serving"`) {
				r.startLine = line
			}
		}
	}
	r.tour = steps(tour)
	r.lab = steps(codeBlocks(section(t, text, "The load lab")))
	for _, b := range codeBlocks(section(t, text, "Several nodes")) {
		for _, line := range b {
			if strings.HasPrefix(line, "./rtlab serve ") {
				r.nodes = append(r.nodes, line)
			}
		}
	}
	if r.startLine == "" || len(r.tour) < 10 || len(r.lab) != 1 || len(r.nodes) != 2 {
		t.Fatalf("README.md: start line %q, %d tour steps, %d lab steps, %d node commands: the test no longer finds the tour", r.startLine, len(r.tour), len(r.lab), len(r.nodes))
	}
	return r
}

// TestREADMETour follows README.md on a fresh folder as a new user would: make run builds the
// binary the tour uses, the server starts with the line shown, every command of the tour runs
// as written (only the port differs) and prints what the README shows, in shape: the same JSON
// keys and types, the same values but for epochs and times, the same lines of text. After a
// restart on the same data directory the tour gives the same answers. The two nodes of
// "Several nodes" start from one folder on one Redis, and the load lab's command prints the
// summary the README shows.
func TestREADMETour(t *testing.T) {
	r := readREADME(t)
	for _, tool := range []string{"curl", "jq", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("RTLAB_REQUIRE_TOUR") != "" {
				t.Fatalf("%s not installed (the tour uses it), and RTLAB_REQUIRE_TOUR is set", tool)
			}
			t.Skipf("%s not installed (the tour uses it; apt-get install %s)", tool, tool)
		}
	}

	// make run builds ./rtlab, then runs it.
	out, err := exec.Command("make", "-s", "-n", "-C", root, "run").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^go build .*-o rtlab \./cmd/rtlab\n\./rtlab serve$`).Match(bytes.TrimSpace(out)) {
		t.Errorf("make run does not build ./rtlab and run ./rtlab serve:\n%s", out)
	}

	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "rtlab")); err != nil {
		t.Fatal(err)
	}
	addr := servertest.FreeAddr(t)
	port := strings.TrimPrefix(addr, "127.0.0.1:")
	start := func() (stop func()) {
		t.Helper()
		cmd, line := startInDir(t, dir, "./rtlab serve --addr "+addr)
		compareStartLine(t, line, r.startLine)
		return func() { servertest.Interrupt(cmd) }
	}
	local := func(cmd string) string { return strings.ReplaceAll(cmd, "localhost:8080", "localhost:"+port) }

	stop := start()
	got := runSteps(t, dir, r.tour, local)
	for i, s := range r.tour {
		compareOutput(t, "tour", s, got[i], true)
	}
	stop()
	stop = start()
	got = runSteps(t, dir, r.tour, local)
	for i, s := range r.tour {
		compareOutput(t, "tour after a restart", s, got[i], false)
	}
	stop()

	t.Run("several nodes", func(t *testing.T) {
		redis := brokertest.StartRedis(t)
		var urls []string
		for _, cmd := range r.nodes {
			a := servertest.FreeAddr(t)
			cmd = regexp.MustCompile(`127\.0\.0\.1:808[0-9]`).ReplaceAllString(cmd, a)
			cmd = strings.ReplaceAll(cmd, "redis://127.0.0.1:6379/0", redis.URL)
			proc, _ := startInDir(t, dir, cmd)
			defer servertest.Interrupt(proc)
			urls = append(urls, "http://"+a)
		}
		for _, u := range urls {
			get(t, u+"/readyz", http.StatusOK)
		}
		post(t, urls[0]+"/api/publish/news/nodes", `{"text":"from node 1"}`, http.StatusOK)
		if b := get(t, urls[1]+"/api/poll/news/nodes?since=0", http.StatusOK); !bytes.Contains(b, []byte("from node 1")) {
			t.Errorf("node 2 does not see node 1's publication: %s", b)
		}
	})

	got = runSteps(t, dir, r.lab, local)
	compareOutput(t, "load lab", r.lab[0], got[0], false)
}

// startInDir runs command (a README line) with bash in dir and returns once it logs that it
// serves, with that line.
func startInDir(t *testing.T, dir, command string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+command)
	cmd.Dir = dir
	return cmd, servertest.StartUntil(t, cmd, `msg="rtlab serving"`, 60*time.Second)
}

// runSteps runs the commands one after the other in one bash in dir, as a user pasting them
// would (variables carry over), and returns each one's output lines.
func runSteps(t *testing.T, dir string, ss []step, rewrite func(string) string) [][]string {
	t.Helper()
	var script strings.Builder
	for i, s := range ss {
		fmt.Fprintf(&script, "printf '\\n@@step %d@@\\n'\n%s\n", i, rewrite(s.cmd))
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("the commands failed: %v\n%s", err, lastLines(stderr.String(), 20))
	}
	out := make([][]string, len(ss))
	parts := regexp.MustCompile(`\n@@step (\d+)@@\n`).Split(stdout.String(), -1)
	if len(parts) != len(ss)+1 {
		t.Fatalf("%d outputs for %d commands:\n%s", len(parts)-1, len(ss), stdout.String())
	}
	for i, p := range parts[1:] {
		out[i] = strings.Split(strings.TrimRight(p, "\n"), "\n")
		if p == "" || p == "\n" {
			out[i] = nil
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logFields is the key=value fields of a logfmt line, in order.
func logFields(line string) [][2]string {
	var fields [][2]string
	for _, m := range regexp.MustCompile(`(?:^| )([a-z_]+)=("(?:[^"\\]|\\.)*"|\S*)`).FindAllStringSubmatch(line, -1) {
		fields = append(fields, [2]string{m[1], m[2]})
	}
	return fields
}

// compareStartLine checks the server's start line against the README's field by field: the
// same keys in order and the same values, but for the time, the port and the build after the
// release (0.9.0+12-g6e1cc73).
func compareStartLine(t *testing.T, got, want string) {
	t.Helper()
	g, w := logFields(got), logFields(want)
	if len(g) != len(w) {
		t.Errorf("start line has %d fields, the README's %d:\n got  %s\n want %s", len(g), len(w), got, want)
		return
	}
	port := regexp.MustCompile(`:\d+$`)
	for i := range g {
		gv, wv := g[i][1], w[i][1]
		switch g[i][0] {
		case "time":
			continue
		case "addr":
			gv, wv = port.ReplaceAllString(gv, ":PORT"), port.ReplaceAllString(wv, ":PORT")
		case "version":
			gv, _, _ = strings.Cut(gv, "+")
			wv, _, _ = strings.Cut(wv, "+")
		}
		if g[i][0] != w[i][0] || gv != wv {
			t.Errorf("start line field %d: server %s=%s, README %s=%s", i, g[i][0], g[i][1], w[i][0], w[i][1])
		}
	}
}

// compareOutput compares what a step printed with what the README shows under it. strict
// compares numbers too (a fresh server gives the README's offsets); otherwise only their type.
func compareOutput(t *testing.T, part string, s step, got []string, strict bool) {
	t.Helper()
	want := trimBlank(s.want)
	got = trimBlank(got)
	// The summary shows "steal s" only when the hypervisor took CPU time during the run.
	if hasColumn(want, "steal s") != hasColumn(got, "steal s") {
		want, got = dropLastColumn(want, "steal s"), dropLastColumn(got, "steal s")
	}
	if len(got) != len(want) {
		t.Errorf("%s: %s\nprinted %d lines, the README shows %d:\n got:\n%s\n want:\n%s", part, s.cmd, len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
		return
	}
	for i := range want {
		if diff := compareLine(got[i], want[i], strict); diff != "" {
			t.Errorf("%s: %s\nline %d: %s\n got  %s\n want %s", part, s.cmd, i+1, diff, got[i], want[i])
		}
	}
}

// hasColumn reports whether a summary table header in lines ends with column.
func hasColumn(lines []string, column string) bool {
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "transport ") && strings.HasSuffix(l, column) {
			return true
		}
	}
	return false
}

// dropLastColumn removes column from the end of summary table headers in lines and the last
// field of the rows under them (not of the "· " notes that follow the rows).
func dropLastColumn(lines []string, column string) []string {
	out := make([]string, len(lines))
	inTable := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "transport ") && strings.HasSuffix(l, column):
			l, inTable = strings.TrimSuffix(l, column), true
		case inTable && strings.HasPrefix(strings.TrimSpace(l), "· "):
		case inTable && strings.HasPrefix(l, "  "):
			if f := strings.Fields(l); len(f) > 0 {
				l = strings.TrimSuffix(strings.TrimRight(l, " "), f[len(f)-1])
			}
		default:
			inTable = false
		}
		out[i] = l
	}
	return out
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

var (
	epochRE  = regexp.MustCompile(`=([0-9]+):[a-z0-9]{8}\b`) // an SSE id: topic=offset:epoch
	numberRE = regexp.MustCompile(`[0-9][0-9,.]*`)
	spacesRE = regexp.MustCompile(`\s+`)
)

// compareLine says how got differs from want in shape, or "".
func compareLine(got, want string, strict bool) string {
	// JSON, alone or after an SSE field name.
	gp, gj, _ := strings.Cut(got, "{")
	wp, wj, _ := strings.Cut(want, "{")
	if strings.Contains(want, "{") && json.Valid([]byte("{"+wj)) {
		if gp != wp {
			return fmt.Sprintf("%q before the JSON, want %q", gp, wp)
		}
		var g, w any
		if err := json.Unmarshal([]byte("{"+gj), &g); err != nil {
			return "not JSON: " + err.Error()
		}
		_ = json.Unmarshal([]byte("{"+wj), &w)
		return compareJSON("", g, w, strict)
	}
	switch {
	case strings.HasPrefix(want, "id: "):
		got, want = epochRE.ReplaceAllString(got, "=$1:EPOCH"), epochRE.ReplaceAllString(want, "=$1:EPOCH")
	case strings.HasPrefix(want, "verdict: "):
		// The verdict's words follow the figures; its start is the shape.
		got, want = firstWords(got, 4), firstWords(want, 4)
	case strings.HasPrefix(want, "machine "):
		got, want = firstWords(got, 1), firstWords(want, 1)
	}
	norm := func(s string) string {
		s = numberRE.ReplaceAllString(s, "#")
		s = strings.NewReplacer("GiB", "B", "MiB", "B", "KiB", "B").Replace(s)
		return spacesRE.ReplaceAllString(strings.TrimSpace(s), " ")
	}
	if norm(got) != norm(want) {
		return "differs"
	}
	return ""
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return numberRE.ReplaceAllString(strings.Join(f, " "), "#")
}

// volatileKeys hold values that differ on every run: epochs, times.
var volatileKeys = map[string]bool{"epoch": true, "time": true, "since": true}

// compareJSON compares JSON values: the same keys, types, array lengths; strings equal but
// under volatileKeys; numbers equal when strict.
func compareJSON(path string, g, w any, strict bool) string {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: %T, want an object", path, g)
		}
		for k := range wv {
			if _, ok := gv[k]; !ok {
				return fmt.Sprintf("%s: no key %q", path, k)
			}
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				return fmt.Sprintf("%s: key %q the README does not show", path, k)
			}
			if volatileKeys[k] {
				if _, isString := gv[k].(string); isString {
					continue
				}
			}
			if d := compareJSON(path+"."+k, gv[k], wv[k], strict); d != "" {
				return d
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Sprintf("%s: %v, want %d elements", path, g, len(wv))
		}
		for i := range wv {
			if d := compareJSON(fmt.Sprintf("%s[%d]", path, i), gv[i], wv[i], strict); d != "" {
				return d
			}
		}
	case float64:
		gv, ok := g.(float64)
		if !ok || (strict && gv != wv) {
			return fmt.Sprintf("%s: %v, want %v", path, g, wv)
		}
	default:
		if fmt.Sprint(g) != fmt.Sprint(w) {
			return fmt.Sprintf("%s: %v, want %v", path, g, w)
		}
	}
	return ""
}
