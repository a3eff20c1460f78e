// Package procstat reads what Linux's /proc says about processes and the machine: a process's
// CPU time and memory, a process tree summed (a server and its helpers), the machine's CPU
// (steal included), and which local process listens on a port. The load lab samples the
// servers it measures, itself and their brokers with it, once a second.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of CPU times in /proc/<pid>/stat. It is 100 on every Linux
// architecture Go supports (the kernel fixes it for the user ABI).
const clockTicks = 100

// Read returns the cumulative CPU time and the resident set size of a process from
// /proc/<pid>/stat and /proc/<pid>/status; pid "self" is this process.
func Read(pid string) (cpu time.Duration, rss uint64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; fields after the last ')'
	// start with field 3, so utime (14) and stime (15) are at 11 and 12.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("procstat: /proc/%s/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("procstat: /proc/%s/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("procstat: /proc/%s/stat: bad utime/stime", pid)
	}
	cpu = time.Duration(ut+st) * time.Second / clockTicks
	st2, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return cpu, 0, err
	}
	rss = statusKB(st2, "VmRSS:")
	return cpu, rss, nil
}

// StatusBytes returns a "Key:   123 kB" line of /proc/<pid>/status in bytes (pid "self": this
// process), such as "VmRSS:" or "RssFile:"; false where /proc does not tell it.
func StatusBytes(pid, key string) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	v := statusField(b, key)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * 1024, true
}

// statusKB returns a "Key:   123 kB" value of a /proc status-like file in bytes.
func statusKB(b []byte, key string) uint64 {
	n, _ := strconv.ParseUint(statusField(b, key), 10, 64)
	return n * 1024
}

// statusField returns the first word after key in a /proc file like status or meminfo, or "".
func statusField(b []byte, key string) string {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	f := bytes.Fields(b[i+len(key):])
	if len(f) == 0 {
		return ""
	}
	return string(f[0])
}

// MachineCPU returns busy, stolen and total jiffies of all CPUs from /proc/stat. Steal is time
// the hypervisor ran other machines while this one had work; it counts as busy.
func MachineCPU() (busy, steal, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	return ParseMachineCPU(b)
}

// ParseMachineCPU reads the first line of /proc/stat (see MachineCPU).
func ParseMachineCPU(b []byte) (busy, steal, total uint64) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, 0
	}
	// user nice system idle iowait irq softirq steal; guest time after them is already
	// counted in user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseUint(string(v), 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
		if i == 7 {
			steal = n
		}
	}
	return busy, steal, total
}

// Meter turns cumulative CPU time into percent of one core between two samples.
type Meter struct {
	last  time.Duration
	at    time.Time
	first time.Duration // CPU time at the first read
}

// Total is the CPU time used between the first read and the last.
func (m *Meter) Total() time.Duration { return m.last - m.first }

// Read samples process pid ("self": the generator): its CPU percent since the last read (0 on
// the first) and its RSS.
func (m *Meter) Read(pid string, now time.Time) (cpu float64, rss uint64, err error) {
	t, rss, err := Read(pid)
	if err != nil {
		return 0, 0, err
	}
	return m.percent(t, now), rss, nil
}

func (m *Meter) percent(cpu time.Duration, now time.Time) float64 {
	if m.at.IsZero() {
		m.last, m.at, m.first = cpu, now, cpu
		return 0
	}
	dt := now.Sub(m.at)
	p := 0.0
	if dt > 0 {
		p = 100 * float64(cpu-m.last) / float64(dt)
	}
	m.last, m.at = cpu, now
	return max(p, 0)
}

// MemTotal returns the machine's memory from /proc/meminfo.
func MemTotal() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return statusKB(b, "MemTotal:")
}

// MachineCPUs counts the machine's CPUs from /proc/stat. runtime.NumCPU counts only those the
// process may run on, which is fewer under taskset.
func MachineCPUs() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return max(n, runtime.NumCPU())
}

// CPUAffinity is the list of CPUs the bench may run on ("0", "2-3") when it is pinned to fewer
// than the machine has, else "". Processes it starts inherit it.
func CPUAffinity(machine int) string {
	if runtime.NumCPU() >= machine {
		return ""
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	return statusField(b, "Cpus_allowed_list:")
}
