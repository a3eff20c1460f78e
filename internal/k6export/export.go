// Package k6export writes the bench's location workload as k6 scripts, so that k6 — a generator
// written elsewhere — can check the bench's figures, and its distributed runners (execution
// segments, k6-operator) can take the same workload beyond one machine.
package k6export

import (
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/transports"
)

//go:embed js/*.js js/profile/*.js
var scripts embed.FS

// Speakable are the transports k6 can speak: k6 has no streaming HTTP client, so no SSE.
func Speakable() []string { return transports.K6() }

// config is config.js: the workload every script reads.
type config struct {
	Peak       int     `json:"peak"`
	Groups     int     `json:"groups"`
	IntervalMs int64   `json:"intervalMs"`
	GraceMs    int64   `json:"graceMs"`
	LongWaitMs int64   `json:"longWaitMs"`
	Stages     []stage `json:"stages"`
	PhasesMs   []int64 `json:"phasesMs"`
}

type stage struct {
	Duration string `json:"duration"`
	Target   int    `json:"target"`
}

// Write writes into dir, for the location workload of o (validated) at peak users, lib.js,
// config.js, a script per transport of o that k6 can speak, and README.md. It returns the
// scripts written and the transports left out.
func Write(dir string, o *bench.Options, peak int, command string) (written, skipped []string, err error) {
	if o.Scenario != bench.ScenarioLocation {
		return nil, nil, fmt.Errorf("--export-k6 writes the location scenario only, not %s", o.Scenario)
	}
	var speak []string
	for _, t := range o.Transports {
		if !slices.Contains(Speakable(), t) {
			skipped = append(skipped, t)
			continue
		}
		speak = append(speak, t)
	}
	if len(speak) == 0 {
		return nil, skipped, fmt.Errorf("--export-k6: none of %s is a transport k6 can speak (%s)", strings.Join(o.Transports, ", "), strings.Join(Speakable(), ", "))
	}
	ex := export{dir: dir, o: o, peak: peak, command: command, scripts: speak, skipped: skipped, dirJS: "js/"}
	return ex.write()
}

// export is one directory of scripts: the workload's config.js and lib.js, and from dirJS a
// script per transport and the extra files the scripts import.
type export struct {
	dir, command     string
	o                *bench.Options
	peak             int
	scripts, skipped []string // transports
	dirJS            string
	extraConfig      []byte   // appended to config.js
	extraJS          []string // files of dirJS written beside the scripts
	note             string   // the README's line on what the scripts send
}

func (e *export) write() (written, skipped []string, err error) {
	w := e.o.WorkloadFor(e.peak)
	cfg := config{Peak: w.Peak, Groups: w.Groups, IntervalMs: w.Interval.Milliseconds(), GraceMs: w.Grace.Milliseconds(), LongWaitMs: w.LongWait.Milliseconds()}
	for _, s := range w.Stages {
		cfg.Stages = append(cfg.Stages, stage{Duration: fmtDuration(s.Duration), Target: s.Target})
	}
	for _, p := range w.Phases {
		cfg.PhasesMs = append(cfg.PhasesMs, p.Milliseconds())
	}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("k6 export: %w", err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("k6 export: config: %w", err)
	}
	files := map[string][]byte{
		"config.js": append(fmt.Appendf(nil, "// Written by %s\n// The location workload at %d users; lib.js and the scripts read it.\nexport const W = %s;\n", e.command, e.peak, js), e.extraConfig...),
	}
	files["lib.js"], _ = scripts.ReadFile("js/lib.js")
	for _, f := range e.extraJS {
		files[f], _ = scripts.ReadFile(e.dirJS + f)
	}
	for _, t := range e.scripts {
		files[t+".js"], _ = scripts.ReadFile(e.dirJS + t + ".js")
		written = append(written, t+".js")
	}
	files["README.md"] = []byte(readme(e.command, e.peak, w, written, e.skipped, e.note))
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), b, 0o644); err != nil {
			return nil, nil, fmt.Errorf("k6 export: %w", err)
		}
	}
	return written, e.skipped, nil
}

// fmtDuration writes d as k6 reads it: "1m30s", "500ms".
func fmtDuration(d time.Duration) string {
	if d%time.Second != 0 {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%ds", int64(d/time.Second))
}
