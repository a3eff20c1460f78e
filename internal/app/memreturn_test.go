package app

import (
	"runtime"
	"testing"
)

// TestRSSFile checks the file-backed figure the store's release is gated on is read: a running
// test binary has its own text mapped.
func TestRSSFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	if n, ok := rssFile(); !ok || n < 1<<20 {
		t.Fatalf("rssFile() = %d, %v; want at least 1 MiB", n, ok)
	}
}
