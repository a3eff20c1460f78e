// Command scaleprobe measures where a cluster's CPU goes, for BENCHMARKS.md ("Scale-out"): it
// publishes -rate publications/s over HTTP to one node, round-robin over -topics topics, for
// -duration, with nobody subscribed, and prints the CPU seconds (user + system, from
// /proc/<pid>/stat) each process of -pids used meanwhile: the nodes and the broker servers.
//
//	scaleprobe -base http://127.0.0.1:18081 -pids node=111,node=112,node=113,redis=120
//
// The node must take the rate (rtlab serve --http-pub-rate -1). With -broker it publishes
// through the Redis broker package itself instead of a node (a Redis URL, a Redis Cluster URL or
// several space-separated, sharded as rtlab serve shards them), to measure the Redis processes
// alone, without a node's CPU on the machine:
//
//	scaleprobe -broker "redis://127.0.0.1:6379/0" -rate 1000 -pids redis=120
//
// It is a measuring tool, not part of rtlab.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/broker/shard"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/procstat"
)

func main() {
	base := flag.String("base", "http://127.0.0.1:18081", "the node published to")
	rate := flag.Int("rate", 1000, "publications per second")
	topics := flag.Int("topics", 100, "topics, loc/0 … loc/N-1")
	dur := flag.Duration("duration", 20*time.Second, "how long to publish")
	pids := flag.String("pids", "", "comma list of name=pid whose CPU is measured")
	brokerURL := flag.String("broker", "", "publish through the Redis broker at this URL (or space-separated shards) instead of over HTTP")
	flag.Parse()
	send := func(i int) error { return post(*base, i%*topics) }
	if *brokerURL != "" {
		b, err := openRedis(*brokerURL)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scaleprobe: %v\n", err)
			os.Exit(1)
		}
		defer b.Close()
		send = func(i int) error {
			_, err := b.Publish(context.Background(), hub.PublishRequest{Topic: "loc/" + strconv.Itoa(i%*topics), Data: []byte(payload)})
			return err
		}
	}
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
	ok, failed := publish(send, *rate, *dur)
	fmt.Printf("published %d, failed %d, in %v\n", ok, failed, *dur)
	for _, p := range procs {
		fmt.Printf("%s %d: %.2f s CPU\n", p.name, p.pid, cpuSeconds(p.pid)-p.cpu0)
	}
}

const payload = `{"lat":1.5,"lon":2.5}`

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// post publishes on topic loc/<topic> of the node at base.
func post(base string, topic int) error {
	resp, err := client.Post(fmt.Sprintf("%s/api/publish/loc/%d", base, topic), "application/json", strings.NewReader(payload))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// openRedis opens the Redis broker (or shards) at urls and starts it, with no subscriber.
func openRedis(urls string) (hub.Broker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var shards []hub.Broker
	for _, u := range strings.Fields(urls) {
		o, err := redis.Open(ctx, u, broker.Options{})
		if err != nil {
			return nil, err
		}
		shards = append(shards, o.Broker)
	}
	b, err := shard.New(shards)
	if err != nil {
		return nil, err
	}
	if err := b.Run(context.Background(), discard{}); err != nil { // its context ends the broker
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

type discard struct{}

func (discard) HandlePublication(*hub.Publication) {}
func (discard) HandleResubscribed()                {}

// publish calls send rate times a second for dur from 32 workers and counts the answers.
func publish(send func(i int) error, rate int, dur time.Duration) (ok, failed int64) {
	jobs := make(chan int, rate)
	var okN, badN atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := send(i); err != nil {
					if badN.Load() < 3 {
						fmt.Fprintln(os.Stderr, "scaleprobe:", err)
					}
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

// cpuSeconds is the user and system time of pid so far; 0 when it cannot be read.
func cpuSeconds(pid int) float64 {
	cpu, _, err := procstat.Read(strconv.Itoa(pid))
	if err != nil {
		return 0
	}
	return cpu.Seconds()
}
