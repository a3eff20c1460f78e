package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/procstat"
	"github.com/rtlab/rtlab/internal/results"
)

// Saturation rule: the generator is saturated when its CPU, averaged over saturationWindow
// consecutive seconds, reaches saturationShare of its budget of GOMAXPROCS cores.
const (
	saturationShare  = 0.90
	saturationWindow = 3
)

// Probe checks, before anything is written, that the run can start: the --target answers as
// its kind should (rtlab: GET /readyz with 200; Centrifugo: a connect; STOMP: CONNECTED), or
// every server of --server is there and starts: rtlab with --broker and --server-args,
// Centrifugo with its config on each broker it runs on; RabbitMQ's Web-STOMP plugin is
// installed; the Spring peer is built (once, into the peer cache). Problems come back as
// *UsageError naming the flag.
func Probe(ctx context.Context, o *Options) error {
	if o.Target != "" {
		return probeTarget(ctx, o)
	}
	for _, kind := range o.Servers {
		switch kind {
		case results.KindRTLab:
			if err := probeRTLab(ctx, o); err != nil {
				return err
			}
		case results.KindCentrifugo:
			for i, broker := range o.Brokers {
				if ok, _ := runsOn(kind, broker, i); !ok {
					continue
				}
				s, err := o.startCentrifugo(ctx, broker, nil)
				if err != nil {
					var ue *UsageError
					if errors.As(err, &ue) {
						return err
					}
					return usageErr("--server/--broker", "centrifugo did not start on --broker %s: %v", BrokerName(broker), err)
				}
				s.Stop()
			}
		case results.KindRabbitMQ:
			if _, _, _, err := rabbitBinaries(); err != nil {
				return err
			}
		case results.KindSpring:
			if _, err := o.springJar(ctx, o.statusW()); err != nil {
				return err
			}
		}
	}
	return nil
}

// probeRTLab starts a trial rtlab server on every broker.
func probeRTLab(ctx context.Context, o *Options) error {
	bin, err := o.serverBinary()
	if err != nil {
		return err
	}
	for _, broker := range o.Brokers {
		if spawned(broker) { // started with each cell; here only looked for
			if _, err := peers.BrokerBinary(brokerURL(broker)); err != nil {
				return flagErr(err)
			}
			continue
		}
		s, err := peers.StartRTLab(ctx, bin, brokerURL(broker), o.ServerArgs, o.AuthSecret, nil)
		if err != nil {
			flag := "--server-args"
			if brokerURL(broker) != "memory" {
				flag = "--broker/--server-args"
			}
			if o.AuthSecret != "" {
				flag = "--auth-secret/" + flag
			}
			what := ""
			if len(o.Brokers) > 1 {
				what = " (--broker " + BrokerName(broker) + ")"
			}
			return usageErr(flag, "the server did not start with them%s: %v", what, err)
		}
		s.Stop()
	}
	return nil
}

// probeTarget checks that --target answers as its kind should.
func probeTarget(ctx context.Context, o *Options) error {
	if o.profile != nil {
		for _, t := range o.Transports {
			if err := preflight(ctx, o, t); err != nil {
				return usageErr("--profile", "%s pre-flight: %v", t, err)
			}
		}
		return nil
	}
	switch o.TargetKind {
	case results.KindCentrifugo:
		if err := probeCentrifugo(ctx, o); err != nil {
			if ce := certProblem(o.Target, err); ce != nil {
				return ce
			}
			return usageErr("--target", "%s: no Centrifugo connect over /connection/websocket (%v); want a running Centrifugo (and --auth-secret, its token HMAC key, when it takes no anonymous clients)", o.Target, err)
		}
	case results.KindSTOMP:
		if err := probeSTOMP(ctx, o, o.targetHost, stompDialectFor(results.KindSTOMP, o)); err != nil {
			if ce := certProblem(o.Target, err); ce != nil {
				return ce
			}
			return usageErr("--target", "%s: no STOMP session over WebSocket (%v); want a STOMP endpoint (and --stomp-login when it asks for one)", o.Target, err)
		}
	default:
		if err := o.probeReady(ctx); err != nil {
			if ce := certProblem(o.Target, err); ce != nil {
				return ce
			}
			return usageErr("--target", "%s does not answer GET /readyz with 200 (%v); want a running rtlab server", o.Target, err)
		}
	}
	return nil
}

// serverVersions names what each server of the run is, for the results: nil when the run
// measures rtlab alone (its version is the results' own).
func (o *Options) serverVersions() map[string]string {
	if !o.peers() {
		return nil
	}
	vs := map[string]string{}
	for _, kind := range o.Servers {
		if v := ServerVersion(o, kind); v != "" {
			vs[kind] = v
		}
	}
	return vs
}

// ServerVersion names the server of kind the bench starts: "Centrifugo 6.9.1", "RabbitMQ
// 3.10.8 (rabbitmq_web_stomp)"; "" when it cannot tell (a target).
func ServerVersion(o *Options, kind string) string {
	switch kind {
	case results.KindRTLab:
		return "rtlab " + nonEmptyStr(o.Version, "dev")
	case results.KindCentrifugo:
		if bin, err := o.centrifugoBinary(); err == nil && o.Target == "" {
			return peers.CentrifugoVersionOf(bin)
		}
	case results.KindRabbitMQ:
		if _, _, v, err := rabbitBinaries(); err == nil {
			return v
		}
	case results.KindSpring:
		return peers.SpringVersion()
	}
	return ""
}

// Execute runs the matrix (every transport at every user level) and returns what was measured.
// When ctx is cancelled (Ctrl-C) the current cell ends early, Results.Stopped is set, and the
// results cover what ran. logDir, when not empty, receives one log file per spawned server.
// An error is returned only when nothing could be measured.
func Execute(ctx context.Context, o *Options, logDir string) (*results.Results, error) {
	res := o.newResults()
	// Rounds go over the whole matrix in turn, so that a noisy machine's slow minutes fall on
	// every broker and transport alike rather than on whichever ran then; the servers compared
	// run one right after the other in each cell, for the same reason.
	for _, at := range o.matrix() {
		if ctx.Err() != nil {
			break
		}
		o.runServer(ctx, res, at, logDir)
	}
	if ctx.Err() != nil {
		res.Stopped = true
	}
	res.Finished = time.Now()
	if len(res.Runs) == 0 && len(res.Warnings) > 0 && !res.Stopped {
		return res, fmt.Errorf("no run completed: %s", res.Warnings[0])
	}
	return res, nil
}

// cellAt is one cell of the matrix: a server of kind on the bi-th broker, a transport, a user
// level, a round.
type cellAt struct {
	kind, broker string
	bi           int
	transport    string
	users, round int
}

// matrix lists the cells in the order they run: rounds, brokers, transports, user levels,
// servers.
func (o *Options) matrix() []cellAt {
	var cells []cellAt
	for round := 1; round <= max(o.Rounds, 1); round++ {
		for bi, broker := range o.Brokers {
			for _, t := range o.Transports {
				for _, u := range o.Users {
					for _, kind := range o.Servers {
						cells = append(cells, cellAt{kind, broker, bi, t, u, round})
					}
				}
			}
		}
	}
	return cells
}

// runServer runs one cell of the matrix into res, or records why it was skipped or failed.
func (o *Options) runServer(ctx context.Context, res *results.Results, at cellAt, logDir string) {
	status := o.statusW()
	if skip, ok := o.skip(at.kind, at.broker, at.bi, at.transport); ok {
		if at.round == 1 && at.users == o.Users[0] && !slices.Contains(res.Skipped, skip) {
			res.Skipped = append(res.Skipped, skip)
			fmt.Fprintf(status, "bench: %s\n", skipText(skip))
		}
		return
	}
	run, err := runCell(ctx, o, at.kind, at.broker, at.transport, at.users, at.round, logDir)
	if err != nil {
		name := o.newRun(at.kind, at.broker, at.transport, at.users, at.round).Key()
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s at %d users: %v", name, at.users, err))
		fmt.Fprintf(status, "bench: %s at %d users: %v\n", name, at.users, err)
		return
	}
	res.Runs = append(res.Runs, *run)
	if run.Stopped {
		res.Stopped = true
	}
}

// newResults starts the results of a run: its settings and the machine.
func (o *Options) newResults() *results.Results {
	host, _ := os.Hostname()
	cpus := procstat.MachineCPUs()
	res := &results.Results{
		Schema:  results.SchemaVersion,
		Version: o.Version,
		Started: time.Now(),
		Config: results.Config{
			Scenario: o.Scenario, Transports: o.Transports, Users: o.Users, Stages: o.Stages,
			GroupSize: o.GroupSize, Groups: o.Groups, Interval: results.Duration(o.Interval),
			Target: o.Target, Broker: RedactBrokers(strings.Join(o.Brokers, ",")), Nodes: o.Nodes, Seed: o.Seed, Args: o.Args,
			ServerVersions: o.serverVersions(),
			Grace:          results.Duration(o.Grace), LongPollWait: results.Duration(o.LongWait), PublishConns: o.PubConns,
			ServerArgs: o.ServerArgs, Auth: o.authMode(), Thresholds: o.Thresholds, Faults: o.Faults,
		},
		Machine: results.Machine{
			Hostname: host, CPUs: cpus, GoOS: runtime.GOOS, GoArch: runtime.GOARCH,
			MemTotal: procstat.MemTotal(), GoMaxProcs: runtime.GOMAXPROCS(0), Affinity: procstat.CPUAffinity(cpus),
		},
		Generator: "rtlab bench (Go, one process)",
	}
	if o.Rounds > 1 {
		res.Config.Rounds = o.Rounds
	}
	if o.peers() {
		res.Config.Servers = strings.Join(o.Servers, ",")
	}
	if o.Target != "" && o.TargetKind != results.KindRTLab {
		res.Config.TargetKind = o.TargetKind
	}
	o.scn.record(o, &res.Config)
	return res
}

// skip says whether the cell of kind on broker (the bi-th of --broker) and transport is left
// out of the matrix, and why.
func (o *Options) skip(kind, broker string, bi int, transport string) (results.Skip, bool) {
	s := results.Skip{ServerKind: kind}
	if ok, why := serves(kind, transport); !ok {
		s.Transport, s.Reason = transport, why
		return s, true
	}
	if ok, why := runsOn(kind, broker, bi); !ok && o.Target == "" {
		s.Broker, s.Reason = BrokerName(broker), why
		return s, true
	}
	if kind == results.KindCentrifugo && transport == "sse" && o.cfKey == "" {
		s.Transport, s.Reason = transport, "Centrifugo's SSE users publish through its HTTP API: give --centrifugo-api-key"
		return s, true
	}
	return s, false
}

// startServers starts the nodes of a cell: kind on broker, their logs in logDir.
func (o *Options) startServers(ctx context.Context, kind, broker, key string, peak int, logDir string, env *faultEnv) ([]*peers.Server, error) {
	n := o.nodesFor(broker)
	if ownBroker(kind) {
		n = 1
	}
	var servers []*peers.Server
	for i := range n {
		var logw io.Writer
		var logf *os.File
		if logDir != "" {
			name := fmt.Sprintf("server-%s-%d-node%d.log", strings.NewReplacer("@", "-", "#", "-r", "~", "-").Replace(key), peak, i)
			f, err := os.Create(filepath.Join(logDir, name))
			if err != nil {
				return servers, fmt.Errorf("creating server log: %w", err)
			}
			logw, logf = f, f
		}
		var s *peers.Server
		var err error
		switch kind {
		case results.KindCentrifugo:
			s, err = o.startCentrifugo(ctx, env.brokerFor(broker, i), logw)
		case results.KindRabbitMQ:
			s, err = startRabbit(ctx, logw)
		case results.KindSpring:
			s, err = o.startSpring(ctx, logw)
		default:
			var bin string
			if bin, err = o.serverBinary(); err == nil {
				s, err = peers.StartRTLab(ctx, bin, env.brokerFor(broker, i), o.ServerArgs, o.AuthSecret, logw)
			}
		}
		if err != nil {
			if logf != nil {
				_ = logf.Close()
			}
			return servers, fmt.Errorf("starting %s: %w", results.KindLabel(kind), err)
		}
		if logf != nil { // the process's output is copied into it until it has ended
			s.AfterStop(func() { _ = logf.Close() })
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// startCell starts a cell's broker (when the lab starts it), proxies and servers, none with
// --target; stop ends them, also after an error.
func (o *Options) startCell(ctx context.Context, kind, broker, transport, key string, peak int, logDir string) (servers []*peers.Server, env *faultEnv, stop func(), err error) {
	stop = func() {}
	if o.Target != "" {
		return nil, nil, stop, nil
	}
	if env, err = o.newFaultEnv(ctx, broker, o.nodesFor(broker), logDir); err != nil {
		return nil, nil, stop, err
	}
	servers, err = o.startServers(ctx, kind, broker, key, peak, logDir, env)
	stop = func() {
		for _, s := range servers {
			s.Stop()
		}
		env.close()
	}
	if err == nil && o.serversUp != nil {
		o.serversUp(transport, servers)
	}
	return servers, env, stop, err
}

// runCell runs one transport at one peak against fresh servers of kind on broker (or the
// target).
func runCell(ctx context.Context, o *Options, kind, broker, transport string, peak, round int, logDir string) (*results.Run, error) {
	run := o.newRun(kind, broker, transport, peak, round)
	plan := NewPlan(Resolve(o.stageSpecs, peak))
	if plan.Peak == 0 {
		return nil, fmt.Errorf("the stages never start a user")
	}
	servers, env, stop, err := o.startCell(ctx, kind, broker, transport, run.Key(), peak, logDir)
	defer stop()
	if err != nil {
		return nil, err
	}
	nodes := []string{o.targetHost}
	if o.Target == "" {
		nodes = nodes[:0]
		for _, s := range servers {
			nodes = append(nodes, s.Addr)
		}
	}

	// A clean baseline: garbage of the previous cell goes back to the OS first.
	runtime.GC()
	debug.FreeOSMemory()
	c := newCell(ctx, o, kind, transport, plan, nodes)
	for _, s := range servers {
		c.stompNodes = append(c.stompNodes, s.STOMP)
	}
	c.level, c.name = peak, run.Key()
	defer c.cancel()
	smp := newSampler(c, servers)
	if len(servers) > 0 && !ownBroker(kind) {
		bu := env.brokerFor(broker, len(servers)) // past the proxies: the broker's own address
		smp.brokerPID, smp.brokers = procstat.ListenerPID(bu), brokerProcs(bu)
	}
	smp.baseline()

	c.flt = newFaultCount(o.faults, len(c.vus), c)
	c.startWorkers()
	c.clk = newClock()
	inj := env.inject(ctx, c, servers)
	defer inj.stop()
	schedCtx, stopSched := context.WithCancel(c.ctx)
	var schedDone sync.WaitGroup
	schedDone.Add(1)
	go func() {
		defer schedDone.Done()
		c.schedule(schedCtx)
	}()
	driveDone := make(chan struct{})
	go func() {
		defer close(driveDone)
		c.drive(c.ctx)
	}()

	run.Started = time.Now()
	if plan.Peak != peak {
		run.Notes = append(run.Notes, fmt.Sprintf("the stages reach %d users, more than the peak of %d: a fixed stage target is above PEAK; memory per user divides by %d", plan.Peak, peak, plan.Peak))
	}
	elapsed, stopped := c.measure(ctx, run, smp)
	stopAt := c.clk.now()
	inj.stop()

	// Wind down: no more publications, every user leaves, answers already on their way are
	// collected, then the workers finish what is queued.
	stopSched()
	schedDone.Wait()
	if stopped {
		c.cancel()
	}
	<-driveDone
	c.stopAll()
	if !waitTimeout(&c.wg, drainTimeout+15*time.Second) {
		run.Notes = append(run.Notes, "some users took more than 17 s to leave (a connection stuck in the kernel?)")
		c.wg.Wait()
	}
	c.stopWorkers()
	// Publications still unanswered now failed; settled before the last collection, so that they
	// are in the totals and the last second.
	c.settle()
	smp.final(run)

	cut := int64(math.MaxInt64)
	if stopped {
		cut = stopAt - int64(o.Grace)
		run.Stopped = true
		run.Notes = append(run.Notes, fmt.Sprintf("interrupted after %s: publications sent in the last %s (the grace period) are left out of the delivery ratio", elapsed.Round(time.Millisecond), o.Grace))
	}
	run.Duration = results.Duration(elapsed)
	c.results(run, smp, cut)
	inj.account(run, cut)
	for _, t := range o.thresholds {
		run.Thresholds = append(run.Thresholds, t.Check(run))
	}
	return run, nil
}

// measure samples every second of the run until its plan ends or ctx is done; it returns how
// long the run lasted and whether it was interrupted.
func (c *cell) measure(ctx context.Context, run *results.Run, smp *sampler) (elapsed time.Duration, stopped bool) {
	plan := c.plan
	seconds := int(math.Ceil(plan.Total.Seconds()))
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for i := 1; i <= seconds; i++ {
		at := min(time.Duration(i)*time.Second, plan.Total)
		t.Reset(time.Until(c.clk.t0.Add(at)))
		select {
		case <-t.C:
		case <-ctx.Done():
			elapsed = time.Since(c.clk.t0)
			if elapsed > time.Duration(i-1)*time.Second { // a partial second was measured
				smp.sample(run, i, plan)
			}
			return elapsed, true
		}
		smp.sample(run, i, plan)
	}
	return plan.Total, false
}

// results fills run from the collector and sampler once the cell has ended.
func (c *cell) results(run *results.Run, smp *sampler, cut int64) {
	col := c.col
	k := col.c
	run.Connections = results.Connections{
		Tried: k.connTried, Opened: k.connOpened, Failed: k.connFailed, Dropped: k.connDropped, Abandoned: k.connAbandoned,
		Users: k.connUsers, Reconnects: k.connReconnects,
		Connect: latencies(col.total[histConnect]), Errors: col.topErrors(10),
	}
	run.Publish = results.Publish{
		Sent: k.pubSent, Failed: k.pubFailed, Latency: latencies(col.total[histPublish]),
		Requests: k.requests,
	}
	exp, rcv, unc := c.delivery(cut)
	d := results.Delivery{
		Expected: exp, Received: rcv, Unconfirmed: unc, OutsideWindow: k.outsideWindow,
		Duplicates: k.duplicates, OutOfOrder: k.outOfOrder,
		Gaps: k.gaps, Ratio: 1, Latency: latencies(col.total[histDelivery]), Other: k.other,
		Histogram: histogramBuckets(col.total[histDelivery]),
	}
	c.opts.scn.recordRun(c, run)
	if exp > 0 {
		d.Ratio = float64(rcv) / float64(exp)
	}
	run.Delivery = d
	secs := time.Duration(run.Duration).Seconds()
	if secs > 0 {
		run.Traffic = results.Traffic{
			MessagesPerSec: float64(k.received) / secs,
			BytesPerSec:    float64(k.bytesIn) / secs,
			RequestsPerSec: float64(k.requests) / secs,
		}
	}
	run.Server = smp.usage(run.Series.ServerCPU, run.Series.ServerRSS, run.Series.ServerGorout, run.Series.ServerThreads, smp.serverBase, smp.serverAvailable)
	if run.Server.Available {
		run.Server.CPUSeconds = smp.serverCPU().Seconds()
		if smp.target != nil {
			run.Notes = append(run.Notes, smp.target.note())
		}
	}
	run.Generator = smp.usage(run.Series.GeneratorCPU, run.Series.GeneratorRSS, nil, nil, smp.genBase, true)
	run.Generator.CPUSeconds = smp.genMeter.Total().Seconds()
	run.BrokerServer = smp.usage(run.Series.BrokerCPU, smp.brokerRSS, nil, nil, smp.brokerBase, smp.brokerPID != "")
	if run.BrokerServer.Available {
		run.BrokerServer.CPUSeconds = smp.brokerMeter.Total().Seconds()
	}
	run.Processes = smp.processes(secs)
	budget := 100 * float64(runtime.GOMAXPROCS(0))
	run.GeneratorSaturated = saturated(run.Series.GeneratorCPU, saturationShare*budget, saturationWindow)
	if run.GeneratorSaturated {
		run.Notes = append(run.Notes, fmt.Sprintf("generator saturated: its CPU reached %.0f%% of its %d-core budget for %d s or more; latency figures may be the generator's", saturationShare*100, runtime.GOMAXPROCS(0), saturationWindow))
	}
	if run.Saturated = smp.saturation(); run.Saturated != nil {
		run.Notes = append(run.Notes, saturationNote(run.Saturated, smp.cpus, smp.local()))
	}
	run.StealSeconds = smp.steal.secs
	if w := smp.steal; w.secs > 0 {
		note := fmt.Sprintf("the hypervisor ran other machines on these CPUs for %d s (steal of %.0f%% of a core or more, at most %.0f%%): latency in those seconds includes the machine's neighbours", w.secs, stealNotable, w.max)
		if run.Delivery.Quiet = w.result(); run.Delivery.Quiet != nil {
			note += fmt.Sprintf("; without them and the seconds after, p99 was %.3g ms", run.Delivery.Quiet.Latency.P99)
		}
		run.Notes = append(run.Notes, note)
	}
	if k.foreign > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%d messages without the bench's vu/seq/ts (another client publishing?), or from outside the receiver's group, were ignored", k.foreign))
	}
	if n := c.lateStarts.Load(); n > 0 {
		why := "the generator was short of CPU"
		if c.drv.httpPublish() {
			why = "the shared pool was busy: the server answered slowly, the generator was short of CPU, or --publish-conns is too small"
		}
		run.Notes = append(run.Notes, fmt.Sprintf("%d publications (%.1f%%) waited more than %s to be sent (longest %s): %s; latency counts that wait",
			n, 100*float64(n)/float64(max(k.pubSent, 1)), lateStart, time.Duration(c.maxStartWait.Load()).Round(time.Millisecond), why))
	}
	if n := c.outOfTurn.Load(); n > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%d publications were not sent: a later one of the same user had gone first (a publish worker stalled), or over HTTP its last one was still unanswered; each sender's order on the wire was kept", n))
	}
	switch {
	case c.drv.httpPublish():
		run.PublishConns = c.poolConns()
		run.Notes = append(run.Notes, fmt.Sprintf("publishing over a shared pool of %d keep-alive connections per node (one per 8 peak users, at most --publish-conns %d)", c.poolConns(), c.opts.PubConns))
	case c.scn.logsIn():
		run.PublishConns = c.poolConns()
		run.Notes = append(run.Notes, fmt.Sprintf("logging in over a shared pool of %d keep-alive connections per node (one per 8 peak users, at most --publish-conns %d)", c.poolConns(), c.opts.PubConns))
	}
}

// saturationNote says that the machine's CPU was saturated and whose CPU it was: a run's
// latency on a saturated machine says little about the server when the CPU went elsewhere.
func saturationNote(s *results.Saturation, cpus int, spawned bool) string {
	type share struct {
		name string
		v    float64
	}
	var parts []share
	if spawned {
		parts = append(parts, share{"the server", s.Server})
	}
	parts = append(parts, share{"the generator", s.Generator})
	if s.Broker > 0 {
		parts = append(parts, share{"the broker server", s.Broker})
	}
	if s.Steal > 0 {
		parts = append(parts, share{"other machines on this host (steal)", s.Steal})
	}
	others := "other processes on this machine"
	if !spawned {
		others += " (the --target server among them, if it runs here)"
	}
	parts = append(parts, share{others, s.Others})
	slices.SortStableFunc(parts, func(a, b share) int { return cmp.Compare(b.v, a.v) })
	who := "mostly by " + parts[0].name
	if parts[0].v < s.Machine/2 {
		who = "by " + parts[0].name + " and " + parts[1].name
	}
	var figures []string
	for _, p := range parts {
		figures = append(figures, fmt.Sprintf("%s %.0f %%", p.name, p.v))
	}
	return fmt.Sprintf("machine CPU saturated for %d s, %s: in those seconds %s, of %d %% on %d CPUs; latency includes that contention",
		s.Seconds, who, strings.Join(figures, ", "), 100*cpus, cpus)
}

// saturated reports whether any window of n consecutive values averages at least limit.
func saturated(cpu []float64, limit float64, n int) bool {
	sum := 0.0
	for i, v := range cpu {
		sum += v
		if i >= n {
			sum -= cpu[i-n]
		}
		if i >= n-1 && sum/float64(n) >= limit {
			return true
		}
	}
	return false
}

// waitTimeout waits for wg, at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
