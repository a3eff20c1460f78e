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

//go:embed js/*.js
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
	w := o.WorkloadFor(peak)
	cfg := config{Peak: w.Peak, Groups: w.Groups, IntervalMs: w.Interval.Milliseconds(), GraceMs: w.Grace.Milliseconds(), LongWaitMs: w.LongWait.Milliseconds()}
	for _, s := range w.Stages {
		cfg.Stages = append(cfg.Stages, stage{Duration: fmtDuration(s.Duration), Target: s.Target})
	}
	for _, p := range w.Phases {
		cfg.PhasesMs = append(cfg.PhasesMs, p.Milliseconds())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("k6 export: %w", err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("k6 export: config: %w", err)
	}
	files := map[string][]byte{
		"config.js": fmt.Appendf(nil, "// Written by %s\n// The location workload at %d users; lib.js and the scripts read it.\nexport const W = %s;\n", command, peak, js),
	}
	lib, _ := scripts.ReadFile("js/lib.js")
	files["lib.js"] = lib
	for _, t := range o.Transports {
		if !slices.Contains(Speakable(), t) {
			skipped = append(skipped, t)
			continue
		}
		b, _ := scripts.ReadFile("js/" + t + ".js")
		files[t+".js"] = b
		written = append(written, t+".js")
	}
	if len(written) == 0 {
		return nil, skipped, fmt.Errorf("--export-k6: none of %s is a transport k6 can speak (%s)", strings.Join(o.Transports, ", "), strings.Join(Speakable(), ", "))
	}
	files["README.md"] = []byte(readme(command, peak, w, written, skipped))
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, nil, fmt.Errorf("k6 export: %w", err)
		}
	}
	return written, skipped, nil
}

// fmtDuration writes d as k6 reads it: "1m30s", "500ms".
func fmtDuration(d time.Duration) string {
	if d%time.Second != 0 {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%ds", int64(d/time.Second))
}
