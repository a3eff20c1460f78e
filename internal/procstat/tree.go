package procstat

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Servers are measured as process trees: the process the bench started and every process under
// it. rtlab and Centrifugo are one process each, the JVM of the Spring peer too, but RabbitMQ is
// a start script, the Erlang VM it runs and the VM's helpers; all of them are what the server
// costs. Every server is sampled the same way, from /proc/<pid>/stat: utime + stime, RSS and
// threads of each process of the tree, summed.

// Stat is what /proc/<pid>/stat says about one process.
type Stat struct {
	PID, PPID int
	CPU       time.Duration // utime + stime
	RSS       uint64        // bytes
	Threads   int64
}

// pageSize converts stat's RSS in pages to bytes.
var pageSize = uint64(os.Getpagesize())

// ParseStat reads one /proc/<pid>/stat line.
func ParseStat(b []byte) (Stat, bool) {
	var p Stat
	i := bytes.IndexByte(b, '(')
	j := bytes.LastIndexByte(b, ')')
	if i < 1 || j < i {
		return p, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:i])))
	if err != nil || pid <= 0 {
		return p, false
	}
	// Fields after the command name start at field 3 (state): ppid is field 4, utime 14,
	// stime 15, num_threads 20, rss 24.
	f := bytes.Fields(b[j+1:])
	if len(f) < 22 {
		return p, false
	}
	num := func(k int) uint64 {
		n, _ := strconv.ParseUint(string(f[k-3]), 10, 64)
		return n
	}
	p.PID = pid
	p.PPID = int(num(4))
	p.CPU = time.Duration(num(14)+num(15)) * time.Second / clockTicks
	p.Threads = int64(min(num(20), 1<<31))
	p.RSS = num(24) * pageSize
	return p, true
}

// Table reads /proc/[0-9]*/stat of every process once: one sample of the whole machine,
// from which each server's tree is summed.
func Table() map[int]Stat {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	t := make(map[int]Stat, len(dirs))
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		if p, ok := ParseStat(b); ok {
			t[p.PID] = p
		}
	}
	return t
}

// Tree follows one server's process tree from sample to sample.
type Tree struct {
	root  int
	last  map[int]time.Duration // cumulative CPU of each process at the last sample
	at    time.Time
	Total time.Duration // CPU used by the tree since the first sample
}

// NewTree follows the tree of process pid.
func NewTree(pid string) *Tree {
	root, _ := strconv.Atoi(pid)
	return &Tree{root: root}
}

// Members returns the processes of the tree in table t.
func (pt *Tree) Members(t map[int]Stat) []Stat {
	children := map[int][]int{}
	for pid, p := range t {
		children[p.PPID] = append(children[p.PPID], pid)
	}
	var out []Stat
	queue := []int{pt.root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		p, ok := t[pid]
		if !ok {
			continue
		}
		out = append(out, p)
		queue = append(queue, children[pid]...)
	}
	return out
}

// Sample sums the tree in table t: CPU percent of one core since the last sample (0 on the
// first), RSS and threads. ok is false when the root process is gone.
func (pt *Tree) Sample(t map[int]Stat, now time.Time) (cpu float64, rss uint64, threads int64, ok bool) {
	ms := pt.Members(t)
	if len(ms) == 0 {
		return 0, 0, 0, false
	}
	first := pt.last == nil
	next := make(map[int]time.Duration, len(ms))
	var used time.Duration
	for _, p := range ms {
		rss += p.RSS
		threads += p.Threads
		next[p.PID] = p.CPU
		if first {
			continue
		}
		// A process born since the last sample counts from its start; one that ended since
		// takes its last interval with it (a helper's, too small to matter).
		used += max(p.CPU-pt.last[p.PID], 0)
	}
	if !first {
		if dt := now.Sub(pt.at); dt > 0 {
			cpu = 100 * float64(used) / float64(dt)
		}
		pt.Total += used
	}
	pt.last, pt.at = next, now
	return cpu, rss, threads, true
}
