package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

// TestVerdictOnRecordedRuns checks the verdict on two runs whose verdicts read wrong: rtlab
// bench --users 10000 (all five transports, the default stages, so only a few seconds at the
// peak) and --server rtlab,rabbitmq,spring --transport stomp --users 5000. The fixtures carry
// the figures those runs printed; their per-second series are rebuilt around them (schema 1).
func TestVerdictOnRecordedRuns(t *testing.T) {
	for _, tt := range []struct {
		file      string
		want, not []string
	}{
		{"users10000.json",
			[]string{
				"WebSocket had the lowest p99 (5.17 ms), short polling the highest (2,970 ms, 570× the lowest)",
				"long polling cost the most server CPU (47.4 % avg), WebSocket the least (18.3 %, 2.6× lower)",
				"short polling: latency is over 428,677 deliveries, the ratio counts 374,966",
			},
			[]string{"no clear difference", "too few seconds"}},
		{"stomp-peers5000.json",
			[]string{
				"STOMP, rtlab against Spring: CPU per delivered message 0.16×, RSS per connection 1.0× and p99 0.00059×",
				"STOMP, rtlab against RabbitMQ: CPU per delivered message 0.23×",
				"STOMP · rtlab had the lowest p99 (1.97 ms), STOMP · Spring the highest (3,365 ms, 1,700× the lowest)",
			},
			[]string{"0.00×", "no clear difference in p99"}},
	} {
		r, err := results.Load(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		Summary(&buf, r)
		out := buf.String()
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: summary lacks %q:\n%s", tt.file, w, out)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(out, w) {
				t.Errorf("%s: summary says %q:\n%s", tt.file, w, out)
			}
		}
	}
}

// TestCountsApart checks that users, connections opened and reconnects are separate columns
// (Spring's reconnects once read as 5,004 users), and that latency over another set of
// deliveries than the ratio's is named.
func TestCountsApart(t *testing.T) {
	r, err := results.Load(filepath.Join("testdata", "stomp-peers5000.json"))
	if err != nil {
		t.Fatal(err)
	}
	spring := &r.Runs[2]
	spring.Connections.Users, spring.Connections.Reconnects = 5000, 4
	spring.Delivery.Unconfirmed, spring.Delivery.OutsideWindow = 120, 37
	spring.Delivery.Latency.Count = spring.Delivery.Received + 120
	var buf bytes.Buffer
	Summary(&buf, r)
	out := buf.String()
	row := strings.Fields(lineWith(out, "STOMP · Spring"))
	// transport (3 words), users, conns, reconn
	if len(row) < 7 || row[3] != "5,000" || row[4] != "5,004" || row[5] != "4" {
		t.Errorf("Spring row %q: want users 5,000, conns 5,004, reconn 4", row)
	}
	want := "STOMP · Spring: latency is over "
	if !strings.Contains(out, want) || !strings.Contains(out, "and 120 of publications it leaves out") || !strings.Contains(out, "37 receipts of publications sent while the receiver subscribed") {
		t.Errorf("summary does not name the latency's deliveries:\n%s", out)
	}
}
