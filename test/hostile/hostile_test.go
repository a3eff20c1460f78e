// Package hostile runs attacks against a real rtlab process and asserts each refusal or bound,
// with a bystander client on the same server that must keep receiving everything in order.
// Each test starts its own server from the binary TestMain builds.
package hostile

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// bin is the rtlab binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rtlab-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err = servertest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestBystanderAcrossRestart checks the harness itself: a bystander on a quiet server receives
// everything, and a crashed and restarted server comes back on the same address.
func TestBystanderAcrossRestart(t *testing.T) {
	p := servertest.Start(t, bin)
	b := servertest.StartBystander(t, p, "news/quiet", "", 20*time.Millisecond)
	for b.Published() < 20 {
		time.Sleep(10 * time.Millisecond)
	}
	b.Check(20)
	p.Restart(true)
	if rss := p.RSS(); rss < 1<<20 {
		t.Fatalf("RSS %d bytes after restart: not a running server", rss)
	}
}
