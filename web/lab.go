package web

import (
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// lab lists the bench runs under dir and serves their reports.
type lab struct {
	dir string // may be empty: nothing to list
}

var labPage = template.Must(template.ParseFS(files, "lab.html"))

// labRun is one row of /lab: a subfolder of the results folder.
type labRun struct {
	Name       string
	Started    time.Time
	Took       time.Duration
	Scenario   string
	Transports []string
	Users      []int
	Broker     string
	Version    string
	Stopped    bool
	Warnings   int
	Report     bool // report.html exists
	Results    bool // results.json exists
	Problem    string
}

// runs reads the results folder. A missing folder is an empty list.
func (l *lab) runs() ([]labRun, error) {
	if l.dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []labRun
	for _, e := range entries {
		if !e.IsDir() || !validRun(e.Name()) {
			continue
		}
		run := labRun{Name: e.Name()}
		dir := filepath.Join(l.dir, e.Name())
		if fi, err := os.Stat(filepath.Join(dir, "report.html")); err == nil && fi.Mode().IsRegular() {
			run.Report = true
		}
		if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
			run.Results = true
			var res results.Results
			if err := json.Unmarshal(b, &res); err != nil {
				run.Problem = "results.json is not readable: " + err.Error()
			} else {
				run.Started, run.Version, run.Stopped = res.Started, res.Version, res.Stopped
				if !res.Finished.IsZero() && res.Finished.After(res.Started) {
					run.Took = res.Finished.Sub(res.Started).Round(time.Second)
				}
				run.Scenario, run.Transports, run.Users, run.Broker = res.Config.Scenario, res.Config.Transports, res.Config.Users, res.Config.Broker
				run.Warnings = len(res.Warnings)
			}
		}
		if !run.Report && !run.Results {
			continue
		}
		if run.Started.IsZero() {
			if fi, err := e.Info(); err == nil {
				run.Started = fi.ModTime()
			}
		}
		out = append(out, run)
	}
	slices.SortStableFunc(out, func(a, b labRun) int {
		if c := b.Started.Compare(a.Started); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	return out, nil
}

func (l *lab) serveList(w http.ResponseWriter, r *http.Request) {
	runs, err := l.runs()
	data := struct {
		Dir  string
		Runs []labRun
		Err  string
	}{Dir: l.dir, Runs: runs}
	if err != nil {
		data.Err = err.Error()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = labPage.Execute(w, data)
}

// serveFile serves report.html or results.json of one run. The run must be a plain directory
// name; os.Root keeps the open inside the results folder even through symlinks.
func (l *lab) serveFile(w http.ResponseWriter, r *http.Request) {
	run, file := r.PathValue("run"), r.PathValue("file")
	if l.dir == "" || !validRun(run) || (file != "report.html" && file != "results.json") {
		http.NotFound(w, r)
		return
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer root.Close()
	f, err := root.Open(run + "/" + file)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	if file == "report.html" {
		// A report is a file from disk with inline scripts: run it in an opaque origin so it
		// cannot reach the page's storage or the API with the visitor's token.
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "sandbox allow-scripts allow-popups")
	} else {
		h.Set("Content-Type", "application/json")
	}
	http.ServeContent(w, r, file, fi.ModTime(), f)
}

// validRun reports whether name can be a run folder: one path element of ordinary characters,
// not starting with a dot (no "..", no hidden folders).
func validRun(name string) bool {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '+', c == ':', c == '@':
		default:
			return false
		}
	}
	return true
}
