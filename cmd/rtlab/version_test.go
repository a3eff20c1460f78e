package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/servertest"
)

// TestBuildVersion: the stamped version wins; else the release with the commit Go recorded,
// -dirty for a changed checkout; else +unknown.
func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) func() (*debug.BuildInfo, bool) {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return func() (*debug.BuildInfo, bool) { return bi, true }
	}
	rev := "6e1cc73f00aa6e1cc73f00aa6e1cc73f00aa6e1c"
	for _, tc := range []struct {
		described string
		read      func() (*debug.BuildInfo, bool)
		want      string
	}{
		{"0.9.0+12-g9c37b29", vcs("vcs.revision", rev), "0.9.0+12-g9c37b29"},
		{"", vcs("vcs.revision", rev, "vcs.modified", "false"), release + "+g6e1cc73"},
		{"", vcs("vcs.revision", rev, "vcs.modified", "true"), release + "+g6e1cc73-dirty"},
		{"", vcs(), release + "+unknown"},
		{"", func() (*debug.BuildInfo, bool) { return nil, false }, release + "+unknown"},
	} {
		if got := buildVersion(tc.described, tc.read); got != tc.want {
			t.Errorf("buildVersion(%q) = %q, want %q", tc.described, got, tc.want)
		}
	}
}

// TestVersionScript runs scripts/version.sh, which make build stamps, in checkouts of its own:
// on a tag, past it, with changes, and before any tag (counting from the commit that set the
// release in main.go).
func TestVersionScript(t *testing.T) {
	script, err := os.ReadFile("../../scripts/version.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what, v string) {
		t.Helper()
		out, err := exec.Command(filepath.Join(dir, "scripts", "version.sh")).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != v {
			t.Errorf("%s: version.sh printed %q (%v), want %q", what, got, err, v)
		}
	}
	git("init", "-q")
	write("scripts/version.sh", string(script))
	write("cmd/rtlab/main.go", "package main\n\nconst release = \"0.8.0\"\n")
	git("add", ".")
	git("commit", "-qm", "release 0.8.0")
	write("a", "1")
	git("add", "a")
	git("commit", "-qm", "one")
	want("before any tag", "0.8.0+1-g"+git("rev-parse", "--short=7", "HEAD"))
	git("tag", "v0.9.0")
	want("on the tag", "0.9.0")
	write("a", "2")
	want("on the tag, changed", "0.9.0+dirty")
	git("commit", "-qam", "two")
	write("a", "3")
	git("commit", "-qam", "three")
	head := git("rev-parse", "--short=7", "HEAD")
	want("two past the tag", "0.9.0+2-g"+head)
	write("a", "4")
	want("two past the tag, changed", "0.9.0+2-g"+head+"-dirty")
}

// TestVersionMakeBuild builds rtlab as make build does: `rtlab version` says what
// scripts/version.sh says, and rtlab_build_info carries that commit as its revision.
func TestVersionMakeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rtlab")
	}
	bin := filepath.Join(t.TempDir(), "rtlab")
	if out, err := exec.Command("make", "-s", "-C", "../..", "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	described, err := exec.Command("../../scripts/version.sh").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(described))
	m := regexp.MustCompile(`^\d+\.\d+\.\d+(?:\+\d+-g([0-9a-f]{7})(?:-dirty)?)?$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("scripts/version.sh printed %q", v)
	}
	if out, _ := exec.Command(bin, "version").Output(); string(out) != "rtlab "+v+"\n" {
		t.Errorf("rtlab version printed %q, want %q", out, "rtlab "+v)
	}
	p := servertest.Start(t, bin)
	resp, err := http.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	info := regexp.MustCompile(`(?m)^rtlab_build_info\{.*$`).Find(b)
	if !bytes.Contains(info, []byte(`version="`+v+`"`)) || bytes.Contains(info, []byte(`revision="unknown"`)) ||
		(m[1] != "" && !regexp.MustCompile(`revision="`+m[1]).Match(info)) {
		t.Errorf("/metrics: %s; want version %s and its commit as revision", info, v)
	}
}

// TestVersionGoBuild: a plain go build in a git checkout names the commit Go recorded, and
// -dirty for a changed one. The checkout is a copy of this one's files in a repository of its
// own (Go records nothing in a git worktree, whose .git is a file).
func TestVersionGoBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rtlab")
	}
	files, err := exec.Command("git", "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			continue // deleted in the checkout, not yet in git
		}
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "-c", "commit.gpgsign=false", "commit", "-qm", "copy")
	rev := run("git", "rev-parse", "--short=7", "HEAD")
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("go", "build", "-o", "rtlab", "./cmd/rtlab")
	if got, want := run("./rtlab", "version"), "rtlab "+release+"+g"+rev+"-dirty"; got != want {
		t.Errorf("rtlab version of a plain go build: %q, want %q", got, want)
	}
}
