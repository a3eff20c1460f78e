// Command scaleprobe measures where a cluster's CPU goes, for BENCHMARKS.md ("Scale-out"): it
// publishes -rate publications/s over HTTP to one node, round-robin over -topics topics, for
// -duration, with nobody subscribed, and prints the CPU seconds (user + system, from
// /proc/<pid>/stat) each process of -pids used meanwhile: the nodes and the broker servers.
//
//	scaleprobe -base http://127.0.0.1:18081 -pids node=111,node=112,node=113,redis=120
//
// The node must take the rate (rtlab serve --http-pub-rate -1). It is a measuring tool, not
// part of rtlab.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("base", "http://127.0.0.1:18081", "the node published to")
	rate := flag.Int("rate", 1000, "publications per second")
	topics := flag.Int("topics", 100, "topics, loc/0 … loc/N-1")
	dur := flag.Duration("duration", 20*time.Second, "how long to publish")
	pids := flag.String("pids", "", "comma list of name=pid whose CPU is measured")
	flag.Parse()
	type proc struct {
		name string
		pid  int
		cpu0 float64
	}
	var procs []*proc
	for _, f := range strings.Split(*pids, ",") {
		name, p, ok := strings.Cut(f, "=")
		pid, err := strconv.Atoi(p)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "scaleprobe: -pids %q: want name=pid,…\n", *pids)
			os.Exit(2)
		}
		procs = append(procs, &proc{name: name, pid: pid, cpu0: cpuSeconds(pid)})
	}
	ok, failed := publish(*base, *rate, *topics, *dur)
	fmt.Printf("published %d, failed %d, in %v\n", ok, failed, *dur)
	for _, p := range procs {
		fmt.Printf("%s %d: %.2f s CPU\n", p.name, p.pid, cpuSeconds(p.pid)-p.cpu0)
	}
}

// publish posts rate publications/s for dur from 32 workers and counts the answers.
func publish(base string, rate, topics int, dur time.Duration) (ok, failed int64) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	jobs := make(chan int, rate)
	var okN, badN atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				resp, err := c.Post(fmt.Sprintf("%s/api/publish/loc/%d", base, i%topics), "application/json", strings.NewReader(`{"lat":1.5,"lon":2.5}`))
				if err != nil {
					badN.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					badN.Add(1)
					continue
				}
				okN.Add(1)
			}
		}()
	}
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for i, end := 0, time.Now().Add(dur); time.Now().Before(end); i++ {
		<-t.C
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return okN.Load(), badN.Load()
}

// cpuSeconds is the user and system time of pid so far (fields 14 and 15 of /proc/pid/stat,
// in clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	return (ut + st) / 100
}
