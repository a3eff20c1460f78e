// Package hostile runs attacks against a real rtlab process and asserts each refusal or bound,
// with a bystander client on the same server that must keep receiving everything in order.
// Each test starts its own server from the binary TestMain builds.
package hostile

import (
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// bin is the rtlab binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) { servertest.Main(m, &bin) }

// TestBystanderAcrossRestart checks the harness itself: a bystander on a quiet server receives
// everything, and a crashed and restarted server comes back on the same address.
func TestBystanderAcrossRestart(t *testing.T) {
	p := servertest.Start(t, bin)
	b := servertest.StartBystander(t, p, "news/quiet", "", 20*time.Millisecond)
	check(t, b, 20)
	p.Restart(true)
	if rss := p.RSS(); rss < 1<<20 {
		t.Fatalf("RSS %d bytes after restart: not a running server", rss)
	}
}
