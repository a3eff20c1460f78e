// Package socketiotest runs the Socket.IO server the tests measure and talk to:
// test/socketio/server.js (socket.io 4, installed by `npm ci` there), a location app that
// broadcasts `location` to the sender's room g{n}, the sender included.
package socketiotest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Start starts server.js with args and returns its base URL; it is killed at the end of the
// test. The test's package must stand two levels below the module root (internal/<pkg>).
// Without node or the package the test is skipped, or fails when RTLAB_REQUIRE_INTEROP is set.
func Start(t *testing.T, args ...string) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", "test", "socketio"))
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "socket.io")); err != nil {
		skipOrFail(t, "socket.io is not installed: run npm ci in "+dir)
	}
	cmd := exec.Command("node", append([]string{"server.js"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node server.js: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(time.Minute):
		t.Fatal("server.js did not start listening")
	}
	return ""
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("RTLAB_REQUIRE_INTEROP") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}
