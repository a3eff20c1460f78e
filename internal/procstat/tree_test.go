package procstat

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as /proc writes it.
	line := "4242 (java (main) x) S 4200 4242 4242 0 -1 4194560 1 0 0 0 250 75 0 0 20 0 37 0 100 1000000 5000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	p, ok := ParseStat([]byte(line))
	if !ok || p.PID != 4242 || p.PPID != 4200 || p.CPU != 3250*time.Millisecond || p.Threads != 37 || p.RSS != 5000*pageSize {
		t.Errorf("parsed %+v, %v", p, ok)
	}
	for _, bad := range []string{"", "4242 (x S 1", "x (y) S 1 2 3"} {
		if _, ok := ParseStat([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestProcTree starts a shell that starts a child, as a start script does, and checks that the
// tree holds both and that CPU the child burns is counted.
func TestProcTree(t *testing.T) {
	sh := exec.Command("sh", "-c", "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 30' & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		_ = sh.Wait()
	}()
	pt := NewTree(strconv.Itoa(sh.Process.Pid))
	start := time.Now()
	_, _, _, ok := pt.Sample(Table(), start)
	if !ok {
		t.Fatal("the root is not in the table")
	}
	deadline := start.Add(30 * time.Second)
	for {
		tab := Table()
		cpu, rss, threads, ok := pt.Sample(tab, time.Now())
		if !ok {
			t.Fatal("the root went away")
		}
		if n := len(pt.Members(tab)); n >= 2 && pt.Total > 0 && rss > 0 && threads >= 2 && cpu >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d processes, CPU %s, RSS %d, threads %d", len(pt.Members(tab)), pt.Total, rss, threads)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FuzzParseStat feeds the /proc/<pid>/stat reader arbitrary lines: it must not panic.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (java (main) x) S 4200 4242 4242 0 -1 4194560 1 0 0 0 250 75 0 0 20 0 37 0 100 1000000 5000 18446744073709551615 0 0 0 0\n"))
	f.Add([]byte("1 () R 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, ok := ParseStat(b); ok && (p.PID < 0 || p.Threads < 0) {
			t.Fatalf("%q parsed as %+v", b, p)
		}
	})
}
