package k6export

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/bench"
)

// TestWrite checks what an export holds: the workload of the chosen level in config.js, a script
// per transport k6 can speak, SSE left out with the reason, and a README that says how to run
// them on one host, on several and with k6-operator.
func TestWrite(t *testing.T) {
	o := &bench.Options{Users: []int{30}, Stages: "2s:PEAK,5s:PEAK,1s:0", Groups: 3, Seed: 9}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	written, skipped, err := Write(dir, o, 30, "rtlab bench --export-k6 x")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(written, ",") != "shortpoll.js,longpoll.js,ws.js,stomp.js" || strings.Join(skipped, ",") != "sse" {
		t.Errorf("written %v, skipped %v", written, skipped)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.js"))
	w := o.WorkloadFor(30)
	for _, want := range []string{`"peak":30`, `"groups":3`, `"intervalMs":3000`, `"stages":[{"duration":"2s","target":30},{"duration":"5s","target":30},{"duration":"1s","target":0}]`,
		`"phasesMs":[` + phases(w) + `]`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.js lacks %s:\n%.300s", want, cfg)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	for _, want := range []string{"k6 run -e BASE=", "--execution-segment", "kind: TestRun", "INSTANCES=3", "clock", "sse"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	o.Scenario = bench.ScenarioChat
	if _, _, err := Write(t.TempDir(), o, 30, "x"); err == nil || !strings.Contains(err.Error(), "location scenario only") {
		t.Errorf("chat export: %v", err)
	}
}

// phases writes the bench's phases as config.js does: whole milliseconds, one per user.
func phases(w bench.Workload) string {
	var s []string
	for _, p := range w.Phases {
		s = append(s, strconv.FormatInt(p.Milliseconds(), 10))
	}
	return strings.Join(s, ",")
}
