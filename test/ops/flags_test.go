package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// helpDefaults runs `rtlab cmd -h` and returns each flag's default as -h prints it (unquoted;
// empty when -h prints none).
func helpDefaults(t *testing.T, cmd string) map[string]string {
	t.Helper()
	out, err := exec.Command(bin, cmd, "-h").Output()
	if err != nil {
		t.Fatalf("rtlab %s -h: %v", cmd, err)
	}
	defs := map[string]string{}
	name := ""
	for _, line := range strings.Split(string(out), "\n") {
		if m := regexp.MustCompile(`^  --([a-z0-9-]+)`).FindStringSubmatch(line); m != nil {
			name = m[1]
			defs[name] = ""
			continue
		}
		if name == "" || !strings.HasPrefix(line, "    \t") {
			continue
		}
		if n := strings.Count(line, "(default "); n > 1 {
			t.Errorf("rtlab %s -h prints %d defaults for --%s: %s", cmd, n, name, line)
		}
		if i := strings.LastIndex(line, " (default "); i >= 0 && strings.HasSuffix(line, ")") {
			d := strings.TrimSuffix(line[i+len(" (default "):], ")")
			if u, err := strconv.Unquote(d); err == nil {
				d = u
			}
			defs[name] = d
		}
	}
	return defs
}

// docRow is one row of a doc's flag table: its flags (first cell) and the backticked values of
// its default cell (second) outside parentheses, none when the cell has none (empty, "off").
type docRow struct {
	flags, defaults []string
}

func docFlags(t *testing.T, doc string) []docRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	tick := regexp.MustCompile("`([^`]*)`")
	paren := regexp.MustCompile(`\([^)]*\)`)
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `--") || len(cells) < 4 {
			continue
		}
		var row docRow
		for _, m := range tick.FindAllStringSubmatch(paren.ReplaceAllString(cells[2], ""), -1) {
			row.defaults = append(row.defaults, m[1])
		}
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			row.flags = append(row.flags, strings.TrimPrefix(m[1], "--"))
		}
		rows = append(rows, row)
	}
	return rows
}

// TestFlagsDocumented: docs/serve.md and docs/bench.md list exactly the flags -h lists, each
// with the default -h prints (a value -h shows, or none where -h shows none or the cell says
// 0), and -h prints each default once.
func TestFlagsDocumented(t *testing.T) {
	for _, c := range []struct{ cmd, doc string }{{"serve", "serve.md"}, {"bench", "bench.md"}} {
		help, rows := helpDefaults(t, c.cmd), docFlags(t, c.doc)
		documented := map[string]bool{}
		for _, row := range rows {
			defs := ""
			for _, name := range row.flags {
				documented[name] = true
				def, ok := help[name]
				if !ok {
					t.Errorf("docs/%s lists --%s; rtlab %s -h does not", c.doc, name, c.cmd)
				}
				defs += def + "\x00"
				if len(row.defaults) == 0 && def != "" {
					t.Errorf("docs/%s: --%s has no default; rtlab %s -h says %q", c.doc, name, c.cmd, def)
				}
			}
			for _, v := range row.defaults {
				if !(strings.Trim(defs, "\x00") == "" && v == "0") && !strings.Contains(defs, v) {
					t.Errorf("docs/%s: %v default to %q; rtlab %s -h says %q", c.doc, row.flags, v, c.cmd, strings.Split(strings.Trim(defs, "\x00"), "\x00"))
				}
			}
		}
		for name := range help {
			if !documented[name] {
				t.Errorf("rtlab %s -h lists --%s; docs/%s does not", c.cmd, name, c.doc)
			}
		}
	}
}
