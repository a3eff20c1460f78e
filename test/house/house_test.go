// Package house checks rules the code keeps as it grows: no function outside tests over 100
// lines, nor nested more than 5 deep, so each reads in one screen; and the user docs within
// their line budget, and each notes file under its size.
package house

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/transports"
)

const (
	maxLines   = 100
	maxNesting = 5
)

// nesting is the deepest run of blocks (if, for, switch, select, function literals) in body.
func nesting(body ast.Node) int {
	deepest := 0
	var walk func(n ast.Node, depth int)
	walk = func(n ast.Node, depth int) {
		ast.Inspect(n, func(c ast.Node) bool {
			if c == n {
				return true
			}
			switch c.(type) {
			case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt, *ast.FuncLit:
				deepest = max(deepest, depth+1)
				walk(c, depth+1)
				return false
			}
			return true
		})
	}
	walk(body, 0)
	return deepest
}

func TestFunctionsStaySmall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxLines {
				t.Errorf("%s:%d: %s is %d lines, over %d: split it into named steps", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, lines, maxLines)
			}
			if n := nesting(fn.Body); n > maxNesting {
				t.Errorf("%s:%d: %s nests %d deep, over %d", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, n, maxNesting)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// maxUserDocLines is the user docs' budget: what a user reads must stay short enough to read.
const maxUserDocLines = 1800

// TestUserDocsBudget counts the lines of the user docs (README.md, docs/*.md without
// docs/notes, clients/js/README.md) and fails over maxUserDocLines, naming each file's count.
func TestUserDocsBudget(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "clients", "js", "README.md")}, docs...)
	total, counts := 0, ""
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++ // a last line without its newline still counts
		}
		rel, _ := filepath.Rel(root, path)
		total += n
		counts += fmt.Sprintf("\n%6d %s", n, rel)
	}
	if total > maxUserDocLines {
		t.Errorf("user docs are %d lines, over %d: cut repetition (link instead), history and wordiness%s", total, maxUserDocLines, counts)
	}
}

// maxNotesLines is the size a notes file stays under, so the record of sittings is read by topic
// and month, not grown into one file without end.
const maxNotesLines = 600

// TestNotesStayShort fails when a file of docs/notes passes maxNotesLines: a sitting that
// would pass it starts a new file, named in the index (docs/notes/benchmarks-<month>.md).
func TestNotesStayShort(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	notes, err := filepath.Glob(filepath.Join(root, "docs", "notes", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) == 0 {
		t.Fatal("no docs/notes/*.md: the notes moved, and this test with them")
	}
	for _, path := range notes {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxNotesLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s is %d lines, over %d: split it by topic or month and list the new file in the index", rel, n, maxNotesLines)
		}
	}
}

// transportNamesAt are where a transport's name may stand as a literal outside the table
// (internal/transports), and why: the transport's own code, server side and lab side.
var transportNamesAt = map[string]string{
	"internal/transport/":       "the transports' handlers and test clients",
	"internal/bench/":           "the lab's drivers, each a transport's client side",
	"tools/loadprobe/":          "a probe driving the wire itself",
	"internal/socketio/":        "ws and wss there are URL schemes of the Socket.IO client",
	"internal/target/":          "a profile names its sections by the lab's transport names, checked against the table",
	"internal/results/kinds.go": "stomp there is a server kind (--target-kind), not a transport",
}

// TestTransportNamesInTheTable fails when a transport's name is written as a string outside
// the table and the transports' own code: everything else reads internal/transports, so that
// adding a transport is its own package plus one row.
func TestTransportNamesInTheTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range transports.All() {
		names[strconv.Quote(r.Name)] = true
		names[strconv.Quote(transports.LabName(r.Name))] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/transports/") || allowedNames(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && names[lit.Value] {
				t.Errorf("%s:%d: transport name %s: use internal/transports", rel, fset.Position(lit.Pos()).Line, lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func allowedNames(rel string) bool {
	for place := range transportNamesAt {
		if strings.HasPrefix(rel, place) {
			return true
		}
	}
	return strings.Contains(rel, "/.") || strings.Contains(rel, "node_modules/") || strings.Contains(rel, "testdata/")
}
