package bench_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
)

// TestNodeOfSpreadsEveryGroup checks the default layout: with several nodes, the members of
// every group are spread over all of them (so a node lost is felt by every group), and the
// users are spread evenly, whatever the number of groups, including a multiple of the nodes.
func TestNodeOfSpreadsEveryGroup(t *testing.T) {
	for _, tc := range []struct{ users, groups, nodes int }{
		{400, 40, 2}, {400, 10, 2}, {400, 31, 2}, {90, 9, 3}, {100, 10, 4}, {12, 3, 1},
	} {
		perNode := make([]int, tc.nodes)
		spans := make([]map[int]bool, tc.groups)
		for i := range tc.users {
			n := bench.NodeOf(i, tc.groups, tc.nodes)
			if n < 0 || n >= tc.nodes {
				t.Fatalf("%+v: user %d on node %d", tc, i, n)
			}
			perNode[n]++
			g := i % tc.groups
			if spans[g] == nil {
				spans[g] = map[int]bool{}
			}
			spans[g][n] = true
		}
		for g, s := range spans {
			if len(s) != tc.nodes {
				t.Errorf("%+v: group %d lives on %d of %d nodes", tc, g, len(s), tc.nodes)
			}
		}
		for n, k := range perNode {
			if even := tc.users / tc.nodes; k < even-tc.groups || k > even+tc.groups {
				t.Errorf("%+v: node %d has %d users, want about %d", tc, n, k, even)
			}
		}
	}
}

// awaitUsers returns once a status line written after mark shows n users.
func awaitUsers(status *lockedBuffer, mark, n int) error {
	re := regexp.MustCompile(`users +` + strconv.Itoa(n) + ` \|`)
	deadline := time.Now().Add(60 * time.Second)
	for !re.MatchString(status.String()[mark:]) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no status line with %d users", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// faults collects the errors of the goroutines that inject faults, one per cell.
type faults struct {
	mu   sync.Mutex
	wg   sync.WaitGroup
	errs []error
}

func (f *faults) do(fn func() error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := fn(); err != nil {
			f.mu.Lock()
			f.errs = append(f.errs, err)
			f.mu.Unlock()
		}
	}()
}

func (f *faults) check(t *testing.T) {
	t.Helper()
	f.wg.Wait()
	for _, err := range f.errs {
		t.Error(err)
	}
}

// TestBenchCountsGapsOnEveryTransport wipes Redis under the subscribed users of every
// transport: history is lost, the server tells each subscriber (WebSocket op gap, SSE event
// gap, STOMP MESSAGE gap:true, polls recovered:false) and every driver must count it.
func TestBenchCountsGapsOnEveryTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and Redis")
	}
	redis := brokertest.StartRedis(t)
	bin := bench.BuildRTLab(t)
	status := &lockedBuffer{}
	const users = 20
	o := &bench.Options{
		Transports: []string{"ws", "sse", "longpoll", "shortpoll", "stomp", bench.TransportSTOMPTCP, bench.TransportSockJS},
		Users:      []int{users}, Stages: "2s:PEAK,8s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 5, ServerBinary: bin, Status: status,
		Brokers: []string{redis.URL},
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: redis.Addr})
	defer rc.Close()
	var f faults
	bench.OnServersUp(o, func(transport string, _ []*peers.Server) {
		mark := len(status.String())
		f.do(func() error {
			if err := awaitUsers(status, mark, users); err != nil {
				return fmt.Errorf("%s: %w", transport, err)
			}
			// Twice, so that a user still subscribing at the first is subscribed at the second.
			for range 2 {
				if err := rc.FlushAll(context.Background()).Err(); err != nil {
					return fmt.Errorf("%s: FLUSHALL: %w", transport, err)
				}
				time.Sleep(2 * time.Second)
			}
			return nil
		})
	})
	res := executeWith(t, o, &f)
	for _, r := range res.Runs {
		if r.Delivery.Gaps == 0 {
			t.Errorf("%s: no gap counted after Redis was wiped: delivery %+v", r.Key(), r.Delivery)
		}
	}
}

// executeWith runs o to the end, then fails the test if a fault f injected went wrong, the run
// failed, or a transport has no run.
func executeWith(t *testing.T, o *bench.Options, f *faults) *results.Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := bench.Execute(ctx, o, t.TempDir())
	f.check(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(o.Transports) {
		t.Fatalf("%d runs, want %d", len(res.Runs), len(o.Transports))
	}
	return res
}

// TestBenchUsersFailOver kills one of two nodes on a shared Redis in the middle of the run: its
// users reconnect to the other node and resume there, as a client given both URLs does, so
// what was accepted is still delivered and no attempt fails against the dead node.
func TestBenchUsersFailOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and Redis")
	}
	redis := brokertest.StartRedis(t)
	bin := bench.BuildRTLab(t)
	status := &lockedBuffer{}
	const users = 40
	o := &bench.Options{
		Transports: []string{"ws", "sse", "longpoll", bench.TransportSTOMPTCP},
		Users:      []int{users}, Stages: "2s:PEAK,10s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 9, ServerBinary: bin, Status: status,
		Brokers: []string{redis.URL}, Nodes: 2,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var f faults
	bench.OnServersUp(o, func(transport string, servers []*peers.Server) {
		mark := len(status.String())
		f.do(func() error {
			if err := awaitUsers(status, mark, users); err != nil {
				return fmt.Errorf("%s: %w", transport, err)
			}
			pid, err := strconv.Atoi(servers[1].PID)
			if err != nil {
				return err
			}
			return syscall.Kill(pid, syscall.SIGKILL)
		})
	})
	res := executeWith(t, o, &f)
	for _, r := range res.Runs {
		c, d := r.Connections, r.Delivery
		t.Logf("%s: connections %+v, delivery ratio %.4f (expected %d, gaps %d)", r.Key(), c, d.Ratio, d.Expected, d.Gaps)
		if c.Dropped == 0 || c.Reconnects == 0 {
			t.Errorf("%s: %d dropped, %d reconnects: the users of the killed node did not move", r.Key(), c.Dropped, c.Reconnects)
		}
		// A connection that was being opened to the node as it died may fail; the rest move.
		if c.Failed > users/10 {
			t.Errorf("%s: %d connections failed: users kept trying the dead node", r.Key(), c.Failed)
		}
		if d.Expected == 0 || d.Ratio < 0.99 {
			t.Errorf("%s: delivery ratio %.4f of %d expected", r.Key(), d.Ratio, d.Expected)
		}
	}
}
