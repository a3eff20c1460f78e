package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testResults is a small results file: two transports at two user levels, a minute each.
func testResults() *Results {
	r := &Results{Schema: SchemaVersion, Version: "v0.1.0-test", Config: Config{Scenario: "location", Interval: Duration(3 * time.Second)}}
	for _, users := range []int{100, 1000} {
		for _, t := range []string{"shortpoll", "ws"} {
			run := Run{Transport: t, Peak: users, Duration: Duration(time.Minute)}
			run.Delivery.Expected, run.Delivery.Received = int64(users)*20, int64(users)*20-1
			run.Delivery.Ratio = float64(run.Delivery.Received) / float64(run.Delivery.Expected)
			run.Series.ServerRSS = make([]uint64, 60)
			r.Runs = append(r.Runs, run)
		}
	}
	return r
}

func TestLoadRoundTrip(t *testing.T) {
	want := testResults()
	data, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(writeFile(t, "results.json", string(data)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got.Runs) != len(want.Runs) || got.Runs[1].Transport != want.Runs[1].Transport {
		t.Fatalf("runs = %+v", got.Runs)
	}
	if time.Duration(got.Config.Interval) != 3*time.Second || time.Duration(got.Runs[0].Duration) != time.Minute {
		t.Errorf("durations = %v, %v", got.Config.Interval, got.Runs[0].Duration)
	}
	if got.Runs[3].Delivery.Ratio != want.Runs[3].Delivery.Ratio || len(got.Runs[0].Series.ServerRSS) != 60 {
		t.Error("figures lost in the round trip")
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // in the error, besides the file name
	}{
		{"newer.json", `{"schema": 3, "runs": []}`, []string{"schema version 3", "reads versions 1 to 2"}},
		{"older.json", `{"schema": 0}`, []string{"schema version 0"}},
		{"noschema.json", `{"runs": []}`, []string{"not an rtlab results file"}},
		{"truncated.json", "{\n  \"schema\": 1,\n  \"runs\": [\n", []string{"malformed results", "unexpected end of JSON input"}},
		{"garbage.json", "<html>", []string{"malformed results", "line 1, column 1"}},
		{"empty.json", "", []string{"malformed results"}},
		{"types.json", "{\"schema\": 1,\n \"runs\": [{\"transport\": \"ws\", \"peak\": \"many\"}]}", []string{"malformed results", "line 2"}},
		{"notransport.json", `{"schema": 1, "runs": [{"peak": 10}]}`, []string{"run 0 has no transport"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.name, tt.content)
			r, err := Load(path)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", r)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v does not name it", err)
	}
}
