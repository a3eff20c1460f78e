package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/app"
)

// TestServeFlagsOneMeaning checks that every rtlab serve flag has one meaning: it sets one
// field of app.Config, no other flag sets that field, its default is that field's in
// app.Defaults, and its help line and docs/serve.md row state one rate, not two.
//
// Why this check: serve.go is the one place where flags meet the configuration, so its syntax
// tree shows every flag, new ones too, with where its value goes; that is mechanical and needs
// no server. A setting with two meanings shows there as two flags on one field, one flag read
// into two places, a default taken from another field (or stated a second time beside the
// one in app.Defaults), or a line describing two rates at once. What each package then does
// with a field is one meaning by construction: a field is one Go name with one doc comment.
func TestServeFlagsOneMeaning(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "serve.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags := serveFlagBindings(t, file)
	if len(flags) < 50 {
		t.Fatalf("found %d flags in serve.go; the parse below misses registrations", len(flags))
	}
	extras := extraTargets(t, file)
	setters := map[string][]string{}
	for _, f := range flags {
		dest := f.dest
		if strings.HasPrefix(dest, "x.") {
			if len(extras[dest]) != 1 {
				t.Errorf("--%s: its value %s is read into %v; want one place", f.name, dest, extras[dest])
				continue
			}
			dest = extras[dest][0]
		}
		setters[dest] = append(setters[dest], f.name)
		checkDefault(t, f, dest)
		checkOneRate(t, "-h", f.name, f.help)
	}
	for dest, names := range setters {
		if len(names) > 1 {
			t.Errorf("%s is set by %d flags: %v; want one", dest, len(names), names)
		}
	}
	for path, n := range configWrites(file) {
		if n > 1 {
			t.Errorf("%s is written %d times in serve.go; want one flag or one assignment", path, n)
		}
	}
	for name, row := range serveDocRows(t) {
		checkOneRate(t, "docs/serve.md", name, row)
	}
}

// flagBinding is one flag registration in serve.go: where its value goes (cfg.Limits.MaxFrame,
// or x.origins for those turned into the Config after parsing), its default and its help.
type flagBinding struct {
	name, dest, help string
	def              ast.Expr
}

// registers names the flags methods that define a flag, with where their name argument is.
func registers(call *ast.CallExpr) (nameArg int, ok bool) {
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel || types.ExprString(sel.X) != "fs" {
		return 0, false
	}
	switch m := strings.TrimSuffix(sel.Sel.Name, "Var"); m {
	case "String", "Int", "Int64", "Uint", "Uint64", "Bool", "Duration", "Float64", "Func", "TextVar":
		if m != sel.Sel.Name {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// serveFlagBindings returns every flag serve.go defines, refusing a registration whose name is
// not a literal or whose value goes nowhere this test can follow.
func serveFlagBindings(t *testing.T, file *ast.File) []flagBinding {
	var out []flagBinding
	assigned := map[*ast.CallExpr]string{} // fs.String(…) calls by what they are assigned to
	ast.Inspect(file, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, r := range as.Rhs {
				if call, ok := r.(*ast.CallExpr); ok {
					assigned[call] = types.ExprString(as.Lhs[i])
				}
			}
		}
		return true
	})
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		at, ok := registers(call)
		if !ok {
			return true
		}
		lit, isLit := call.Args[at].(*ast.BasicLit)
		dest := assigned[call]
		if at == 1 {
			dest = strings.TrimPrefix(types.ExprString(call.Args[0]), "&")
		}
		if !isLit || dest == "" {
			t.Errorf("%s: a flag whose name is not a literal or whose value is not kept", types.ExprString(call))
			return true
		}
		help := call.Args[at+2].(*ast.BasicLit).Value
		out = append(out, flagBinding{name: strings.Trim(lit.Value, `"`), dest: dest, def: call.Args[at+1], help: help})
		return true
	})
	return out
}

// extraTargets returns, for each x.field read after parsing (*x.origins), where each read's value
// goes: the assignment's left side, or the receiver whose method takes it (level for
// level.UnmarshalText). A read outside an assignment is refused.
func extraTargets(t *testing.T, file *ast.File) map[string][]string {
	out := map[string][]string{}
	inAssign := 0
	ast.Inspect(file, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for i, r := range as.Rhs {
			lhs := as.Lhs[min(i, len(as.Lhs)-1)]
			for _, read := range extraReads(r) {
				inAssign++
				out[read] = append(out[read], assignTarget(lhs, r))
			}
		}
		return true
	})
	if all := len(extraReads(file)); all != inAssign {
		t.Errorf("%d of the %d reads of a serveExtras value are outside an assignment; want each read into one place", all-inAssign, all)
	}
	return out
}

// extraReads returns the serveExtras values n reads (x.origins for *x.origins).
func extraReads(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(n ast.Node) bool {
		if star, ok := n.(*ast.StarExpr); ok {
			if s := types.ExprString(star.X); strings.HasPrefix(s, "x.") {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

// assignTarget is where an assignment's right side r goes: lhs, or when that is _, the receiver
// of the method r calls.
func assignTarget(lhs ast.Expr, r ast.Expr) string {
	if s := types.ExprString(lhs); s != "_" {
		return s
	}
	if call, ok := r.(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			return types.ExprString(sel.X)
		}
	}
	return "_"
}

// configWrites counts, by field path, the writes to cfg in file: flags bound to a field and
// assignments after parsing.
func configWrites(file *ast.File) map[string]int {
	out := map[string]int{}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if s := types.ExprString(l); strings.HasPrefix(s, "cfg.") {
					out[s]++
				}
			}
		case *ast.CallExpr:
			if at, ok := registers(n); ok && at == 1 {
				out[strings.TrimPrefix(types.ExprString(n.Args[0]), "&")]++
			}
		}
		return true
	})
	return out
}

// checkDefault checks that f's default is read from the field f sets (d.Limits.MaxFrame for
// cfg.Limits.MaxFrame), and that a field with a default in app.Defaults is not given another
// one beside it.
func checkDefault(t *testing.T, f flagBinding, dest string) {
	t.Helper()
	path, isField := strings.CutPrefix(dest, "cfg.")
	readsOwn := false
	ast.Inspect(f.def, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if from, ok := strings.CutPrefix(types.ExprString(sel), "d."); ok && !strings.Contains(types.ExprString(sel.X), "(") {
			if from != path {
				t.Errorf("--%s sets %s but shows the default of d.%s", f.name, dest, from)
			}
			readsOwn = true
			return false
		}
		return true
	})
	if !isField || readsOwn {
		return
	}
	v := reflect.ValueOf(app.Defaults())
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	if v.IsValid() && !v.IsZero() {
		t.Errorf("--%s: default %s beside app.Defaults' %s %v; want d.%s, stated once", f.name, types.ExprString(f.def), path, v, path)
	}
}

// checkOneRate refuses a line that states two rates: "per second" twice means one flag holds
// two limits that deserve a flag each.
func checkOneRate(t *testing.T, where, name, line string) {
	t.Helper()
	if n := strings.Count(line, "per second"); n > 1 {
		t.Errorf("%s: --%s states %d rates; give each its own flag: %s", where, name, n, line)
	}
}

// docRow is a one-flag row of docs/serve.md's tables.
var docRow = regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\|(.*)$")

// serveDocRows returns docs/serve.md's one-flag rows by flag name.
func serveDocRows(t *testing.T) map[string]string {
	b, err := os.ReadFile("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range docRow.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 50 {
		t.Fatalf("found %d flag rows in docs/serve.md; the pattern misses them", len(out))
	}
	return out
}
