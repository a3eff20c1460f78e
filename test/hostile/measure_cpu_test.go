package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// msCPU is the CPU time (user + system) process pid has used so far; pid 0 is this process.
func msCPU(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start after its ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // clock ticks are 1/100 s on Linux
}

// msLoad measures the CPU share the server (pid) and this test process (the attackers and
// the bystander) use from now until the returned func is called, which says it in words.
// With $RTLAB_MEASURE_PERF naming a file, the server is also recorded by perf meanwhile.
func msLoad(t *testing.T, pid int) func() string {
	s0, a0, start := msCPU(pid), msCPU(0), time.Now()
	var perf *exec.Cmd
	if out := os.Getenv("RTLAB_MEASURE_PERF"); out != "" {
		perf = exec.Command("perf", "record", "-g", "-o", out, "-p", strconv.Itoa(pid))
		if err := perf.Start(); err != nil {
			t.Logf("perf: %v", err)
			perf = nil
		}
	}
	return func() string {
		el := time.Since(start)
		if perf != nil {
			_ = perf.Process.Signal(syscall.SIGINT)
			_ = perf.Wait()
		}
		return fmt.Sprintf("CPU: server %.0f %%, test process (attackers, bystander) %.0f %%",
			100*(msCPU(pid)-s0).Seconds()/el.Seconds(), 100*(msCPU(0)-a0).Seconds()/el.Seconds())
	}
}
