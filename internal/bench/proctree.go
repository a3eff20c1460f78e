package bench

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

// procStat is what /proc/<pid>/stat says about one process.
type procStat struct {
	pid, ppid int
	cpu       time.Duration // utime + stime
	rss       uint64        // bytes
	threads   int64
}

// pageSize converts stat's RSS in pages to bytes.
var pageSize = uint64(os.Getpagesize())

// parseStat reads one /proc/<pid>/stat line.
func parseStat(b []byte) (procStat, bool) {
	var p procStat
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
	p.pid = pid
	p.ppid = int(num(4))
	p.cpu = time.Duration(num(14)+num(15)) * time.Second / clockTicks
	p.threads = int64(min(num(20), 1<<31))
	p.rss = num(24) * pageSize
	return p, true
}

// procTable reads /proc/[0-9]*/stat of every process once: one sample of the whole machine,
// from which each server's tree is summed.
func procTable() map[int]procStat {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	t := make(map[int]procStat, len(dirs))
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		if p, ok := parseStat(b); ok {
			t[p.pid] = p
		}
	}
	return t
}

// procTree follows one server's process tree from sample to sample.
type procTree struct {
	root  int
	last  map[int]time.Duration // cumulative CPU of each process at the last sample
	at    time.Time
	total time.Duration // CPU used by the tree since the first sample
}

func newProcTree(pid string) *procTree {
	root, _ := strconv.Atoi(pid)
	return &procTree{root: root}
}

// members returns the processes of the tree in table t.
func (pt *procTree) members(t map[int]procStat) []procStat {
	children := map[int][]int{}
	for pid, p := range t {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var out []procStat
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

// sample sums the tree in table t: CPU percent of one core since the last sample (0 on the
// first), RSS and threads. ok is false when the root process is gone.
func (pt *procTree) sample(t map[int]procStat, now time.Time) (cpu float64, rss uint64, threads int64, ok bool) {
	ms := pt.members(t)
	if len(ms) == 0 {
		return 0, 0, 0, false
	}
	first := pt.last == nil
	next := make(map[int]time.Duration, len(ms))
	var used time.Duration
	for _, p := range ms {
		rss += p.rss
		threads += p.threads
		next[p.pid] = p.cpu
		if first {
			continue
		}
		// A process born since the last sample counts from its start; one that ended since
		// takes its last interval with it (a helper's, too small to matter).
		used += max(p.cpu-pt.last[p.pid], 0)
	}
	if !first {
		if dt := now.Sub(pt.at); dt > 0 {
			cpu = 100 * float64(used) / float64(dt)
		}
		pt.total += used
	}
	pt.last, pt.at = next, now
	return cpu, rss, threads, true
}
