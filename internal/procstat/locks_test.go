package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestLockPIDReadsTheTable(t *testing.T) {
	table := filepath.Join(t.TempDir(), "locks")
	lines := "1: FLOCK  ADVISORY  WRITE 4242 fe:00:9986676 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 5151 fe:00:9986676 0 EOF\n" + // a waiter, not the holder
		"2: POSIX  ADVISORY  READ 77 08:01:12 0 EOF\n"
	if err := os.WriteFile(table, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := uint64(0xfe << 8) // major 0xfe, minor 0
	if got := lockPID(table, dev, 9986676, 1); got != 4242 {
		t.Errorf("holder of fe:00:9986676 = %d, want 4242", got)
	}
	if got := lockPID(table, dev, 9986676, 4242); got != 0 {
		t.Errorf("self holds it: got %d, want 0", got)
	}
	if got := lockPID(table, 8<<8|1, 12, 1); got != 77 {
		t.Errorf("holder of 08:01:12 = %d, want 77", got)
	}
}

// A real process holding the file open is named with its command line.
func TestLockHolderNamesAnOpener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "exec 3<\"$0\"; exec sleep 60", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	want := "pid " + strconv.Itoa(cmd.Process.Pid) + " (sleep 60)"
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = LockHolder(path); got == want {
			return
		}
	}
	t.Fatalf("LockHolder = %q, want %q", got, want)
}

func TestLockHolderWithoutHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "free.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// This process holds it: not "another process".
	if got := LockHolder(path); got != "" {
		t.Errorf("LockHolder of a file only this process holds = %q, want \"\"", got)
	}
}
