package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// LockHolder names the process that holds the file at path open and locked, as
// "pid 1234 (rtlab serve --addr 127.0.0.1:8080)", so that a second server started on the same
// --data-dir can say who is in the way instead of "timeout". It reads /proc/locks (the flock
// bbolt takes), then the open files of every process; "" when it cannot tell (not Linux, or the
// holder is in another PID namespace).
func LockHolder(path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return ""
	}
	self := os.Getpid()
	pid := lockPID("/proc/locks", uint64(st.Dev), st.Ino, self)
	if pid == 0 {
		pid = openerPID("/proc", path, self)
	}
	if pid == 0 {
		return ""
	}
	if cmd := Cmdline(pid); cmd != "" {
		return fmt.Sprintf("pid %d (%s)", pid, cmd)
	}
	return fmt.Sprintf("pid %d", pid)
}

// Cmdline is process pid's command line with its arguments joined by spaces; "" when it
// cannot be read.
func Cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))), " ")
}

// lockPID returns the process holding a lock on the file (dev, ino) according to the
// /proc/locks table at name, other than self; 0 if none. A line reads
// "1: FLOCK  ADVISORY  WRITE 22487 fe:00:9986676 0 EOF": pid, then major:minor:inode.
func lockPID(name string, dev, ino uint64, self int) int {
	f, err := os.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" { // "->" lines are waiters, not holders
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid == self {
			continue
		}
		if sameDevIno(fields[5], want) {
			return pid
		}
	}
	return 0
}

// sameDevIno compares /proc/locks' "major:minor:inode" allowing for the kernel's varying
// zero padding of the device numbers.
func sameDevIno(got, want string) bool {
	g, w := strings.Split(got, ":"), strings.Split(want, ":")
	if len(g) != 3 || len(w) != 3 {
		return false
	}
	for i := range 2 {
		a, err1 := strconv.ParseUint(g[i], 16, 32)
		b, err2 := strconv.ParseUint(w[i], 16, 32)
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return g[2] == w[2]
}

// openerPID returns a process other than self with path open, by the links in
// /proc/*/fd; 0 if none is found.
func openerPID(proc, path string, self int) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		abs = p
	}
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(proc, e.Name(), "fd"))
		if err != nil {
			continue // another user's process, or gone
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(proc, e.Name(), "fd", fd.Name())); err == nil && target == abs {
				return pid
			}
		}
	}
	return 0
}
