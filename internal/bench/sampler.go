package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/procstat"
	"github.com/rtlab/rtlab/internal/results"
)

// scrapeGoroutines reads GET /metrics from addr (a spawned server's) once, for its
// goroutines; its CPU and memory come from /proc.
func scrapeGoroutines(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	hc := newHTTPConn(conn, addr, false)
	defer hc.close()
	dl, _ := ctx.Deadline()
	req := appendRequest(nil, "GET", addr, []byte("/metrics"), "Connection: close\r\n", nil)
	var gor int64
	err = hc.roundTrip(req, dl, func(status int, body []byte) error {
		if status != 200 {
			return &StatusError{Code: status}
		}
		pm, err := parseProm(bytes.NewReader(body))
		gor = pm.goroutines
		return err
	})
	if err != nil && !errors.Is(err, errConnClose) {
		return 0, err
	}
	return gor, nil
}

// machineBusyShare is the machine CPU share above which a second counts as saturated.
const machineBusyShare = 0.95

// stealNotable is the steal, in percent of one core, from which a second counts as one where
// the machine's neighbours took CPU from the run.
const stealNotable = 10.0

// stealWatch keeps what the machine's neighbours did to a run: the seconds in which they took
// CPU, the worst of them, and the deliveries of the other seconds. A second right after one
// with steal is left out too: deliveries held up by the steal arrive in it.
type stealWatch struct {
	secs    int // seconds with at least stealNotable steal
	max     float64
	prev    bool                    // the previous second had at least stealNotable steal
	quiet   *hdrhistogram.Histogram // deliveries of the seconds counted
	counted int                     // seconds merged into quiet
	leftOut int                     // seconds not merged into quiet
}

func newStealWatch() *stealWatch { return &stealWatch{quiet: newHist()} }

// second takes one second's steal (percent of one core) and its deliveries.
func (w *stealWatch) second(steal float64, deliveries *hdrhistogram.Histogram) {
	stole := steal >= stealNotable
	if stole {
		w.secs++
	}
	if stole || w.prev {
		w.leftOut++
	} else {
		w.quiet.Merge(deliveries)
		w.counted++
	}
	w.prev = stole
	w.max = max(w.max, steal)
}

// result is the latency of the seconds counted, nil when none was left out or none counted.
func (w *stealWatch) result() *results.QuietLatency {
	if w.leftOut == 0 || w.quiet.TotalCount() == 0 {
		return nil
	}
	return &results.QuietLatency{Seconds: w.counted, LeftOut: w.leftOut, Latency: latencies(w.quiet)}
}

// sampler takes the per-second samples of a run cell: the recorder's counts, server and
// generator CPU and memory, and the server's goroutines.
type sampler struct {
	c        *cell
	servers  []*peers.Server
	trees    []*procstat.Tree // one per server
	genMeter procstat.Meter

	target      *targetCost // --target: what it costs, when it can be read
	machBusy    uint64
	machSteal   uint64
	machTotal   uint64
	machineBusy int // seconds the whole machine was saturated
	// sat sums, over the saturated seconds, whose CPU it was (percent of one core); its
	// Seconds is machineBusy.
	sat   results.Saturation
	cpus  int // the machine's CPUs, for steal in percent of one core
	steal *stealWatch

	serverBase      uint64 // server RSS before users
	genBase         uint64 // generator RSS before users
	serverAvailable bool

	// The broker server's process, when brokerPID found it.
	brokerPID   string
	brokerMeter procstat.Meter
	brokerBase  uint64
	brokerRSS   []uint64
	// Every broker server process found, when --broker names several (procstat.Listeners).
	brokers []brokerProc
}

// brokerProc is one broker server process, measured each second.
type brokerProc struct {
	addr, pid string
	meter     procstat.Meter
}

// brokerProcs are the broker server processes of this machine that a --broker entry names.
func brokerProcs(raw string) []brokerProc {
	var ps []brokerProc
	for _, l := range procstat.Listeners(raw) {
		ps = append(ps, brokerProc{addr: l.Addr, pid: l.PID})
	}
	return ps
}

// processes is each node's and each broker process's CPU over secs seconds, when there are
// several of either; nil otherwise.
func (s *sampler) processes(secs float64) []results.ProcessCPU {
	if (len(s.trees) < 2 && len(s.brokers) < 2) || secs <= 0 {
		return nil
	}
	var ps []results.ProcessCPU
	for i, t := range s.trees {
		ps = append(ps, results.ProcessCPU{Name: fmt.Sprintf("node %d", i+1), CPUSeconds: t.Total.Seconds(), CPUPercentAvg: 100 * t.Total.Seconds() / secs})
	}
	for _, b := range s.brokers {
		c := b.meter.Total().Seconds()
		ps = append(ps, results.ProcessCPU{Name: "broker " + b.addr, CPUSeconds: c, CPUPercentAvg: 100 * c / secs})
	}
	return ps
}

func newSampler(c *cell, servers []*peers.Server) *sampler {
	s := &sampler{c: c, servers: servers, serverAvailable: true, cpus: procstat.MachineCPUs(), steal: newStealWatch()}
	for _, srv := range servers {
		s.trees = append(s.trees, procstat.NewTree(srv.PID))
	}
	if c.opts.Target != "" {
		s.target = newTargetCost(c.opts, c.kind)
	}
	return s
}

// baseline records RSS before any user starts and primes the CPU meters.
func (s *sampler) baseline() {
	now := time.Now()
	if _, rss, err := s.genMeter.Read("self", now); err == nil {
		s.genBase = rss
	}
	_, rss, _, _ := s.server(now)
	s.serverBase = rss
	if s.brokerPID != "" {
		if _, rss, err := s.brokerMeter.Read(s.brokerPID, now); err == nil {
			s.brokerBase = rss
		} else {
			s.brokerPID = ""
		}
	}
	for i := range s.brokers {
		_, _, _ = s.brokers[i].meter.Read(s.brokers[i].pid, now)
	}
	s.machBusy, s.machSteal, s.machTotal = procstat.MachineCPU()
}

// server samples the servers: CPU percent (sum over nodes), RSS (sum), goroutines (sum, where a
// server reports them) and threads (sum).
func (s *sampler) server(now time.Time) (cpu float64, rss uint64, gor, threads int64) {
	c := s.c
	if s.target != nil {
		cpu, rss, gor, threads, ok := s.target.sample(c.ctx, now)
		s.serverAvailable = s.serverAvailable && ok
		return cpu, rss, gor, threads
	}
	t := procstat.Table()
	for i, srv := range s.servers {
		if c, r, th, ok := s.trees[i].Sample(t, now); ok {
			cpu += c
			rss += r
			threads += th
		}
		if srv.Metrics == "" {
			continue
		}
		if g, err := scrapeGoroutines(context.Background(), srv.Metrics); err == nil {
			gor += g
		}
	}
	return cpu, rss, gor, threads
}

// serverCPU is the CPU time the servers used over the run.
func (s *sampler) serverCPU() time.Duration {
	if s.target != nil {
		return s.target.total()
	}
	var d time.Duration
	for _, t := range s.trees {
		d += t.Total
	}
	return d
}

// sample closes second i of the run.
func (s *sampler) sample(run *results.Run, i int, plan *Plan) {
	c := s.c
	sec := c.col.collect()
	now := time.Now()
	ser := &run.Series
	ser.Users = append(ser.Users, int(c.connected.Load()))
	ser.Sent = append(ser.Sent, sec.pubSent)
	ser.Received = append(ser.Received, sec.received)
	ser.Errors = append(ser.Errors, sec.errors)
	ser.PublishFailed = append(ser.PublishFailed, sec.pubFailed)
	ser.BytesIn = append(ser.BytesIn, sec.bytesIn)
	ser.Requests = append(ser.Requests, sec.requests)
	p50, p99 := 0.0, 0.0
	if c.col.second.TotalCount() > 0 {
		p50 = float64(c.col.second.ValueAtQuantile(50)) / 1000
		p99 = float64(c.col.second.ValueAtQuantile(99)) / 1000
	}
	ser.LatencyP50 = append(ser.LatencyP50, p50)
	ser.LatencyP99 = append(ser.LatencyP99, p99)
	cpu, rss, gor, threads := s.server(now)
	ser.ServerCPU = append(ser.ServerCPU, cpu)
	ser.ServerRSS = append(ser.ServerRSS, rss)
	ser.ServerGorout = append(ser.ServerGorout, gor)
	if s.local() {
		ser.ServerThreads = append(ser.ServerThreads, threads)
	}
	gcpu, grss, _ := s.genMeter.Read("self", now)
	ser.GeneratorCPU = append(ser.GeneratorCPU, gcpu)
	ser.GeneratorRSS = append(ser.GeneratorRSS, grss)
	bcpu := 0.0
	if s.brokerPID != "" {
		var brss uint64
		bcpu, brss, _ = s.brokerMeter.Read(s.brokerPID, now) // zero while the broker is down (restarted, say)
		ser.BrokerCPU = append(ser.BrokerCPU, bcpu)
		s.brokerRSS = append(s.brokerRSS, brss)
	}
	for i := range s.brokers {
		_, _, _ = s.brokers[i].meter.Read(s.brokers[i].pid, now) // totals only; a down process adds nothing
	}
	if c.scn.logsIn() {
		ser.Logins = append(ser.Logins, sec.loginTried)
	}
	steal := 0.0
	if b, st, t := procstat.MachineCPU(); t > s.machTotal {
		dt := float64(t - s.machTotal)
		steal = 100 * float64(s.cpus) * float64(st-s.machSteal) / dt
		if float64(b-s.machBusy)/dt >= machineBusyShare {
			s.machineBusy++
			s.saturatedSecond(100*float64(s.cpus)*float64(b-s.machBusy)/dt, cpu, gcpu, bcpu, steal)
		}
		s.machBusy, s.machSteal, s.machTotal = b, st, t
	}
	ser.MachineSteal = append(ser.MachineSteal, steal)
	s.steal.second(steal, c.col.second)

	at := time.Duration(i) * time.Second
	total := c.col.total[histDelivery]
	p99all := 0.0
	if total.TotalCount() > 0 {
		p99all = float64(total.ValueAtQuantile(99)) / 1000
	}
	fmt.Fprintf(c.opts.statusW(), "bench %-9s %6d users | %3ds/%ds stage %d/%d | users %6d | msgs/s %7d | p99 %8.1fms | errors %d\n",
		c.name, c.level, int(at.Seconds()), int(math.Ceil(plan.Total.Seconds())), plan.StageAt(at-1), len(plan.Stages),
		c.connected.Load(), sec.received, p99all, c.col.c.errors)
}

// local reports whether the servers' processes are sampled here: the ones the bench started,
// or a target's --target-pid.
func (s *sampler) local() bool {
	return len(s.servers) > 0 || (s.target != nil && s.target.local())
}

// saturatedSecond adds a saturated second's CPU, by whose it was, to s.sat. With --target the
// server's CPU cannot be told from other processes (it may not even run here): it counts among
// the others.
func (s *sampler) saturatedSecond(machine, server, generator, broker, steal float64) {
	if !s.local() {
		server = 0
	}
	s.sat.Seconds++
	s.sat.Machine += machine
	s.sat.Server += server
	s.sat.Generator += generator
	s.sat.Broker += broker
	s.sat.Steal += steal
	s.sat.Others += max(0, machine-server-generator-broker-steal)
}

// saturation is whose CPU it was over the saturated seconds, in averages; nil when the machine
// was saturated for fewer than saturationWindow seconds.
func (s *sampler) saturation() *results.Saturation {
	if s.sat.Seconds < saturationWindow {
		return nil
	}
	n := float64(s.sat.Seconds)
	round := func(v float64) float64 { return math.Round(v/n*10) / 10 }
	return &results.Saturation{
		Seconds: s.sat.Seconds, Machine: round(s.sat.Machine), Server: round(s.sat.Server),
		Generator: round(s.sat.Generator), Broker: round(s.sat.Broker), Steal: round(s.sat.Steal), Others: round(s.sat.Others),
	}
}

// final folds what was counted after the last sample (answers collected while users left)
// into the last second, so totals and series agree.
func (s *sampler) final(run *results.Run) {
	sec := s.c.col.collect()
	ser := &run.Series
	if n := len(ser.Sent); n > 0 {
		ser.Sent[n-1] += sec.pubSent
		ser.Received[n-1] += sec.received
		ser.Errors[n-1] += sec.errors
		ser.PublishFailed[n-1] += sec.pubFailed
		ser.BytesIn[n-1] += sec.bytesIn
		ser.Requests[n-1] += sec.requests
		if len(ser.Logins) == n {
			ser.Logins[n-1] += sec.loginTried
		}
	}
}

// usage summarises a process's samples. base is its RSS before users started.
func (s *sampler) usage(cpu []float64, rss []uint64, gor, threads []int64, base uint64, available bool) results.Usage {
	u := results.Usage{Available: available}
	if !available || len(cpu) == 0 {
		return u
	}
	sum := 0.0
	for _, v := range cpu {
		sum += v
		u.CPUPercentMax = max(u.CPUPercentMax, v)
	}
	u.CPUPercentAvg = sum / float64(len(cpu))
	for _, v := range rss {
		u.RSSMaxBytes = max(u.RSSMaxBytes, v)
	}
	for _, v := range gor {
		u.GoroutinesMax = max(u.GoroutinesMax, v)
	}
	for _, v := range threads {
		u.ThreadsMax = max(u.ThreadsMax, v)
	}
	plan := s.c.plan
	i := int(math.Ceil(plan.PeakEnd.Seconds())) - 1
	i = min(max(i, 0), len(rss)-1)
	u.RSSAtPeak = rss[i]
	if u.RSSAtPeak > base && plan.Peak > 0 {
		u.BytesPerUser = float64(u.RSSAtPeak-base) / float64(plan.Peak)
	}
	return u
}
