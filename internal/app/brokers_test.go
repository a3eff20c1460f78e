package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/state"
)

// TestOpenBrokersMemory: the memory broker opens through the table like the others, keeping its
// own files: with --data-dir and durable topics, rtlab.db and state.db there and its gauges
// registered; without, the state in memory and no file. A scheme no row serves, and shards of
// a broker that is not shared, are refused naming what is wanted.
func TestOpenBrokersMemory(t *testing.T) {
	ctx := context.Background()
	policy := func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: 10} }
	durable := func(topic string) bool { return strings.HasPrefix(topic, "chat/") }
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	o, err := openBrokers(ctx, Config{Broker: "memory", DataDir: dir, Durable: []string{"chat/*"}, DurableHistory: 5}, policy, durable, reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "rtlab.db"); o.DurableAt != want || len(o.Files) != 1 {
		t.Errorf("durable topics at %q in %d files, want %q in one", o.DurableAt, len(o.Files), want)
	}
	if _, ok := o.State.(*state.Bolt); !ok {
		t.Errorf("state is %T, want the bbolt file under --data-dir", o.State)
	}
	if families, err := reg.Gather(); err != nil || !hasFamily(families, "rtlab_topics_held") {
		t.Errorf("the memory broker's gauges are not registered (%v)", err)
	}
	o.close()
	for _, f := range []string{"rtlab.db", "state.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	o, err = openBrokers(ctx, Config{Broker: "memory"}, policy, durable, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.State.(*state.Memory); !ok || len(o.Files) != 0 || o.DurableAt != "" {
		t.Errorf("without --data-dir: state %T, %d files, durable at %q; want memory, none", o.State, len(o.Files), o.DurableAt)
	}
	o.close()

	for url, want := range map[string]string{
		"kafka://x:9092": "want memory, redis://",
		"memory memory":  "shards are servers of a shared broker",
		"  ":             "want memory, redis://",
	} {
		if _, err := openBrokers(ctx, Config{Broker: url}, policy, durable, prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--broker %q: %v, want an error saying %q", url, err, want)
		}
	}
}

func hasFamily(families []*dto.MetricFamily, name string) bool {
	for _, f := range families {
		if f.GetName() == name {
			return true
		}
	}
	return false
}
