package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// TestFaultsReported checks that each fault is marked on the charts and accounted for in the
// summary and the page, and that a silent loss is flagged.
func TestFaultsReported(t *testing.T) {
	r := testResults()
	rec := results.Duration(2 * time.Second)
	run := &r.Runs[0]
	run.Faults = []results.Fault{
		{Kind: "restart-broker", At: results.Duration(10 * time.Second), Expected: 100, Delivered: 90, Told: 10, Gaps: 4, Recovery: &rec},
		{Kind: "partition-node", Node: 1, At: results.Duration(20 * time.Second), For: results.Duration(10 * time.Second), Expected: 100, Delivered: 97, SilentlyLost: 3, PublishFailed: 7, Recovery: &rec},
	}
	var sum bytes.Buffer
	Summary(&sum, r)
	for _, want := range []string{
		"· " + label(run) + " fault restart-broker at 10s: delivered 90 of 100, told (gap) 10, silently lost 0, gaps 4, dups 0, reordered 0, refused publishes 0, recovered in 2s",
		flagMark + " " + label(run) + " fault partition-node node 1 at 20s for 10s: delivered 97 of 100, told (gap) 0, silently lost 3,",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"faults":[{"at":10,"end":10,"label":"restart-broker"},{"at":20,"end":30,"label":"partition-node=1"}]`, "silently lost 3"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
