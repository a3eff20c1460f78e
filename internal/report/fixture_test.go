package report

import (
	"math"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// fixtureOptions shapes a hand-built results file.
type fixtureOptions struct {
	transports []string
	levels     []int
	seconds    int
	// slower scales latency and CPU, so a second fixture reads as a regression of the first.
	slower float64
}

// testResults is the golden fixture: two transports, two user levels, 60 points per series.
// WebSocket at 1,000 users saturates the generator; short polling at 1,000 users loses messages
// and fails connections, so every warning and flag has something to show.
func testResults() *results.Results {
	return fixture(fixtureOptions{transports: []string{"shortpoll", "ws"}, levels: []int{100, 1000}, seconds: 60, slower: 1})
}

// fixture builds results with plausible shapes: users ramp up for a third of the run, hold, and
// ramp down; latency and CPU follow the users and differ by transport.
func fixture(o fixtureOptions) *results.Results {
	start := time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	r := &results.Results{
		Schema:  results.SchemaVersion,
		Version: "v0.1.0-test",
		Started: start,
		Config: results.Config{
			Scenario:     "location",
			Transports:   o.transports,
			Users:        o.levels,
			Stages:       "20s:300,30s:PEAK,10s:0",
			GroupSize:    10,
			Interval:     results.Duration(3 * time.Second),
			Broker:       "memory",
			Nodes:        1,
			Seed:         42,
			Args:         []string{"rtlab", "bench", "--scenario", "location", "--users", "100,1000", "--transports", "shortpoll,ws"},
			Grace:        results.Duration(2 * time.Second),
			LongPollWait: results.Duration(25 * time.Second),
			PublishConns: 64,
		},
		Machine:   results.Machine{Hostname: "lab-1", CPUs: 8, GoOS: "linux", GoArch: "amd64", MemTotal: 16 << 30, GoMaxProcs: 4},
		Generator: "rtlab bench (Go, one process)",
		Warnings:  []string{"server and generator shared one machine"},
	}
	at := start
	for _, users := range o.levels {
		for _, t := range o.transports {
			run := fixtureRun(t, users, o.seconds, o.slower)
			run.Started = at
			at = at.Add(time.Duration(o.seconds) * time.Second)
			r.Runs = append(r.Runs, run)
		}
	}
	r.Finished = at
	return r
}

// transportCost is how expensive each transport is in the fixture, relative to WebSocket.
func transportCost(t string) float64 {
	switch t {
	case "shortpoll":
		return 4
	case "longpoll":
		return 2.5
	case "sse":
		return 1.3
	case "stomp":
		return 1.1
	}
	return 1
}

func fixtureRun(t string, users, seconds int, slower float64) results.Run {
	cost := transportCost(t) * slower
	scale := float64(users) / 1000
	run := results.Run{
		Transport: t,
		Peak:      users,
		Duration:  results.Duration(time.Duration(seconds) * time.Second),
	}
	s := &run.Series
	var received, expected int64
	for i := range seconds {
		frac := 1.0
		switch {
		case i < seconds/3:
			frac = float64(i) / float64(seconds/3)
		case i >= seconds*5/6:
			frac = float64(seconds-1-i) / float64(seconds-seconds*5/6)
		}
		u := int(math.Round(float64(users) * frac))
		wave := 1 + 0.15*math.Sin(float64(i)/4)
		recv := int64(float64(u) * 10 / 3 * wave)
		s.Users = append(s.Users, u)
		s.Sent = append(s.Sent, int64(u/3))
		s.Received = append(s.Received, recv)
		s.Errors = append(s.Errors, 0)
		s.PublishFailed = append(s.PublishFailed, 0)
		p50 := (0.8 + 2*scale) * cost * wave
		if recv == 0 {
			p50 = 0
		}
		s.LatencyP50 = append(s.LatencyP50, p50)
		s.LatencyP99 = append(s.LatencyP99, p50*4.5)
		s.BytesIn = append(s.BytesIn, recv*180)
		s.Requests = append(s.Requests, int64(float64(u)*cost/4))
		s.ServerCPU = append(s.ServerCPU, (2+30*frac*scale)*cost*wave)
		s.ServerRSS = append(s.ServerRSS, uint64(24<<20+float64(u)*12*1024*cost))
		s.ServerGorout = append(s.ServerGorout, int64(20+2*u))
		s.GeneratorCPU = append(s.GeneratorCPU, (3+40*frac*scale)*wave)
		s.GeneratorRSS = append(s.GeneratorRSS, uint64(30<<20+float64(u)*8*1024))
		received += recv
		expected += recv
	}
	run.Connections = results.Connections{
		Tried:   int64(users),
		Opened:  int64(users),
		Connect: results.Latencies{Count: int64(users), Min: 0.3, Mean: 1.1, P50: 0.9, P90: 1.8, P95: 2.4, P99: 4.9, P999: 8.1, Max: 11.2},
	}
	run.Publish = results.Publish{
		Sent:     expected / 10,
		Latency:  results.Latencies{Count: expected / 10, Min: 0.2 * cost, Mean: 0.9 * cost, P50: 0.7 * cost, P90: 1.5 * cost, P95: 2 * cost, P99: 3.9 * cost, P999: 7 * cost, Max: 12 * cost},
		Requests: expected / 10,
	}
	p50 := (0.8 + 2*scale) * cost
	run.Delivery = results.Delivery{
		Expected: expected,
		Received: received,
		Ratio:    1,
		Latency:  results.Latencies{Count: received, Min: p50 / 4, Mean: p50 * 1.3, P50: p50, P90: p50 * 2.2, P95: p50 * 3, P99: p50 * 4.5, P999: p50 * 7, Max: p50 * 15},
	}
	// The distribution in buckets of ten per decade around p50, as the bench records it.
	shares := []float64{0.05, 0.2, 0.3, 0.25, 0.12, 0.05, 0.02, 0.01}
	k0 := int(math.Ceil(10*math.Log10(p50*1000))) - 3
	left := received
	for i, sh := range shares {
		n := int64(float64(received) * sh)
		if i == len(shares)-1 {
			n = left
		}
		left -= n
		upTo := math.Round(math.Pow(10, float64(k0+i)/10)) / 1000
		run.Delivery.Histogram = append(run.Delivery.Histogram, results.Bucket{UpToMs: upTo, Count: n})
	}
	secs := float64(seconds)
	run.Traffic = results.Traffic{MessagesPerSec: float64(received) / secs, BytesPerSec: float64(received) * 180 / secs, RequestsPerSec: float64(users) * cost / 4}
	run.Server = results.Usage{
		CPUPercentAvg: (2 + 20*scale) * cost, CPUPercentMax: (2 + 32*scale) * cost,
		RSSMaxBytes: uint64(24<<20 + float64(users)*12*1024*cost), RSSAtPeak: uint64(24<<20 + float64(users)*12*1024*cost),
		BytesPerUser: 12 * 1024 * cost, GoroutinesMax: int64(20 + 2*users), Available: true,
		ThreadsMax: 9, CPUSeconds: (2 + 20*scale) * cost * secs / 100,
	}
	run.Generator = results.Usage{
		CPUPercentAvg: 3 + 28*scale, CPUPercentMax: 3 + 43*scale,
		RSSMaxBytes: uint64(30<<20 + float64(users)*8*1024), RSSAtPeak: uint64(30<<20 + float64(users)*8*1024),
		BytesPerUser: 8 * 1024, Available: true,
	}
	if t == "ws" && users >= 1000 {
		run.GeneratorSaturated = true
		run.Generator.CPUPercentMax = 97
		run.Notes = append(run.Notes, "generator CPU reached 97 % of its budget")
	}
	if t == "shortpoll" && users >= 1000 {
		run.Connections.Failed = 12
		run.Connections.Opened -= 12
		run.Connections.Dropped = 3
		run.Connections.Errors = []results.Count{{Label: "dial tcp: connect: connection refused", N: 9}, {Label: "<script>alert(1)</script> timeout", N: 3}}
		lostN := expected / 500 // 99.8 %
		run.Delivery.Received -= lostN
		run.Delivery.Latency.Count -= lostN
		run.Delivery.Ratio = float64(run.Delivery.Received) / float64(expected)
		run.Delivery.Duplicates = 4
		run.Delivery.OutOfOrder = 17
		run.Publish.Failed = 2
		for i := 25; i < min(30, seconds); i++ {
			s.Errors[i] = 3
		}
		if seconds > 28 {
			s.PublishFailed[26], s.PublishFailed[28] = 1, 1
		}
	}
	return run
}
