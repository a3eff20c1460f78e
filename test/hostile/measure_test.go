package hostile

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// The measurements behind BENCHMARKS.md's "Tenant bounds": each tenant row at a scaled-down
// size, against the binary the suite built or the one $RTLAB_MEASURE_BIN names (an older build,
// for the figures before). They log figures and assert nothing, and run only when
// $RTLAB_MEASURE is set:
//
//	RTLAB_MEASURE=1 go test ./test/hostile -run 'TestMeasure' -v
func measured(t *testing.T) string {
	t.Helper()
	if os.Getenv("RTLAB_MEASURE") == "" {
		t.Skip("a measurement: set RTLAB_MEASURE=1")
	}
	if b := os.Getenv("RTLAB_MEASURE_BIN"); b != "" {
		return b
	}
	return bin
}

func msMint(user string) string {
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	return tok
}

func msMetric(p *servertest.Proc, name string) float64 {
	// Uncompressed: a gzip answer would leave the server holding a compressor (about 1 MiB)
	// that only the measurement asked for.
	req, _ := http.NewRequest("GET", p.URL()+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, name+" ") {
			v, _ := strconv.ParseFloat(l[len(name)+1:], 64)
			return v
		}
	}
	return -1
}

// msMem says the server's memory: RSS, and of it the anonymous pages (the Go heap, stacks,
// the runtime's own) and the file-backed ones (the binary, and the durable store's mapped
// pages, clean page cache the kernel takes back under pressure); the Go heap in use and what
// the runtime holds but has not returned to the system.
func msMem(p *servertest.Proc) string {
	st := msStatus(p.PID())
	return fmt.Sprintf("RSS %.1f MiB (anonymous %.1f, files %.1f), heap in use %.0f MiB, idle not released %.0f MiB",
		float64(st["VmRSS"])/1024, float64(st["RssAnon"])/1024, float64(st["RssFile"])/1024, msMetric(p, "go_memstats_heap_inuse_bytes")/(1<<20),
		(msMetric(p, "go_memstats_heap_idle_bytes")-msMetric(p, "go_memstats_heap_released_bytes"))/(1<<20)) + msRuntime(p, st)
}

// msRuntime is the Go runtime's own memory besides the heap, with RSS_DETAIL set.
func msRuntime(p *servertest.Proc, st map[string]int64) string {
	if os.Getenv("RSS_DETAIL") == "" {
		return ""
	}
	s := fmt.Sprintf("; threads %d", st["Threads"])
	for _, n := range []string{"heap_sys", "heap_released", "stack_inuse", "stack_sys", "mspan_sys", "mcache_sys", "gc_sys", "other_sys", "buck_hash_sys", "sys"} {
		s += fmt.Sprintf(", %s %.1f", n, msMetric(p, "go_memstats_"+n+"_bytes")/(1<<20))
	}
	return s
}

// msStatus reads the kB figures of /proc/pid/status.
func msStatus(pid int) map[string]int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	m := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if f := strings.Fields(v); ok && (len(f) == 2 && f[1] == "kB" || k == "Threads") {
			m[k], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return m
}

func msFrom(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
}

func msPost(hc *http.Client, url, body, token string) int {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0
	}
	var b [512]byte
	for {
		if _, err := res.Body.Read(b[:]); err != nil {
			break
		}
	}
	res.Body.Close()
	return res.StatusCode
}

func msParallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

func msP99(t *testing.T, p *servertest.Proc, token string, n int) time.Duration {
	d := tt.Dialer{}
	if token != "" {
		d = d.Bearer(token)
	}
	c := d.WS(t, p.WS("/api/ws"))
	defer c.Close()
	c.Op("connected")
	var rtts []time.Duration
	for i := range n {
		s := time.Now()
		c.Send(fmt.Sprintf(`{"op":"ping","id":%d}`, i))
		c.Op("pong")
		rtts = append(rtts, time.Since(s))
		time.Sleep(15 * time.Millisecond)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)*99/100]
}

// Rooms: ENTER into 10,000 new rooms, then 3 TALKs of 3.9 KB into 2,000 of them; a restart.
func TestMeasureRooms(t *testing.T) {
	p := servertest.Start(t, measured(t), "--http-pub-rate", "-1")
	t.Logf("start: %s", msMem(p))
	if os.Getenv("RTLAB_MEASURE_WAIT") != "" {
		// The baseline is a server in service: a fresh process has not yet paged in what any
		// request needs (the runtime's first spans, the chat and archive code, the metrics).
		bc := msFrom("127.0.0.1")
		for i := range 220 {
			msPost(bc, fmt.Sprintf("%s/api/publish/chat/ok%d", p.URL(), i%20), `{"type":"TALK","sender":"bob","text":"hello"}`, "")
		}
		for i := range 20 {
			get(t, bc, fmt.Sprintf("%s/api/poll/chat/ok%d?since=0", p.URL(), i))
		}
		time.Sleep(35 * time.Second) // a memory check
		t.Logf("in service (220 publications, 20 history reads, 35 s): %s", msMem(p))
	}
	hc := msFrom("127.0.0.2")
	pad := strings.Repeat("x", 3900)
	start := time.Now()
	msParallel(10000, 8, func(i int) {
		msPost(hc, fmt.Sprintf("%s/api/publish/chat/r%d", p.URL(), i), `{"type":"ENTER","sender":"eve"}`, "")
	})
	t.Logf("10,000 ENTERs in %v: %s", time.Since(start).Round(time.Second), msMem(p))
	msParallel(6000, 8, func(i int) {
		msPost(hc, fmt.Sprintf("%s/api/publish/chat/r%d", p.URL(), i%2000), `{"type":"TALK","sender":"eve","text":"`+pad+`"}`, "")
	})
	t.Logf("+6,000 TALKs of 3.9 KB: %s; durable windows %.0f MiB", msMem(p), msMetric(p, "rtlab_durable_window_bytes")/(1<<20))
	if os.Getenv("RTLAB_MEASURE_WAIT") != "" {
		time.Sleep(130 * time.Second)
		t.Logf("130 s later: %s; topics held %.0f, durable windows %.0f MiB", msMem(p), msMetric(p, "rtlab_topics_held"), msMetric(p, "rtlab_durable_window_bytes")/(1<<20))
	}
	p.Restart(false)
	time.Sleep(5 * time.Second)
	t.Logf("after a restart (5 s, archive's first sweep): %s", msMem(p))
	if os.Getenv("RTLAB_MEASURE_WAIT") != "" {
		time.Sleep(30 * time.Second) // a memory check
		t.Logf("35 s after the restart: %s", msMem(p))
	}
}

// Topics: 50,000 distinct topic names.
func TestMeasureTopics(t *testing.T) {
	p := servertest.Start(t, measured(t), "--http-pub-rate", "-1")
	t.Logf("start: %s", msMem(p))
	hc := msFrom("127.0.0.2")
	msParallel(50000, 8, func(i int) { msPost(hc, fmt.Sprintf("%s/api/publish/many/t%d", p.URL(), i), `{"n":1}`, "") })
	t.Logf("50,000 topics: %s", msMem(p))
}

// Erasure: bob publishes to 281 topics; eve publishes 1,700 × 60 KB (~100 MB) to new topics.
func TestMeasureErasure(t *testing.T) {
	p := servertest.Start(t, measured(t), "--auth-secret", secret, "--http-pub-rate", "-1")
	hc := msFrom("127.0.0.1")
	bob, eve := msMint("bob"), msMint("eve")
	for i := range 281 {
		msPost(hc, fmt.Sprintf("%s/api/publish/bob/t%d", p.URL(), i), `{"n":1}`, bob)
	}
	body := `{"pad":"` + strings.Repeat("x", 60<<10) + `"}`
	ec := msFrom("127.0.0.2")
	start := time.Now()
	msParallel(1700, 4, func(i int) { msPost(ec, fmt.Sprintf("%s/api/publish/flood/t%d", p.URL(), i), body, eve) })
	el := time.Since(start)
	kept := 0
	for i := range 281 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/poll/bob/t%d?since=0", p.URL(), i), nil)
		req.Header.Set("Authorization", "Bearer "+bob)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := res.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		res.Body.Close()
		if strings.Contains(b.String(), `"recovered":true`) && strings.Contains(b.String(), `"n":1`) {
			kept++
		}
	}
	t.Logf("eve's 1,700 x 60 KB in %v: bob's idle topics with history %d of 281; %s", el.Round(time.Millisecond), kept, msMem(p))
}

// Pings: 20 connections pipelining pings; a bystander's ping p99.
func TestMeasurePings(t *testing.T) {
	p := servertest.Start(t, measured(t))
	base := msP99(t, p, "", 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pongs atomic.Int64
	for range 20 {
		c := (tt.Dialer{From: "127.0.0.2"}).WS(t, p.WS("/api/ws"))
		smallSendBuffer(c)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				if _, err := c.Next(3 * time.Second); err != nil {
					return
				}
				pongs.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c.Write(`{"op":"ping"}`) != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second)
	s, p0 := time.Now(), pongs.Load()
	load := msLoad(t, p.PID())
	during := msP99(t, p, "", 300)
	el, cpu := time.Since(s), load()
	close(stop)
	wg.Wait()
	t.Logf("ping flood: bystander p99 %v (before the flood %v); attackers' answers %.0f/s; %s", during, base, float64(pongs.Load()-p0)/el.Seconds(), cpu)
}

// Logins: 32 concurrent wrong passwords; a bystander's ping p99.
func TestMeasureLogins(t *testing.T) {
	users := t.TempDir() + "/users"
	// bcrypt of "right" at cost 10
	os.WriteFile(users, []byte("ann:$2a$10$6DV20kTlX4J8QxqT3l7JVeQVmVcAap4VZ/BI/tGcF8KVDrPUt0oFG\n"), 0o600)
	p := servertest.Start(t, measured(t), "--auth-secret", secret, "--login-users", users)
	base := msP99(t, p, msMint("by"), 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n, limited atomic.Int64
	hc := msFrom("127.0.0.2")
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := msPost(hc, p.URL()+"/api/login", `{"user":"ann","password":"guess"}`, "")
				n.Add(1)
				if st == 429 {
					limited.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	s, n0 := time.Now(), n.Load()
	load := msLoad(t, p.PID())
	during := msP99(t, p, msMint("by"), 300)
	el, cpu := time.Since(s), load()
	close(stop)
	wg.Wait()
	t.Logf("login flood: bystander p99 %v (before %v); %d attempts, %d answered 429 (%.0f/s while measured); %s", during, base, n.Load(), limited.Load(), float64(n.Load()-n0)/el.Seconds(), cpu)
}

// Thousand: a load test holding 1,000 WebSocket connections from one host, default flags.
func TestMeasureThousand(t *testing.T) {
	p := servertest.Start(t, measured(t))
	ok, refused := 0, 0
	var open []*tt.WSConn
	for range 1000 {
		c, err := (tt.Dialer{From: "127.0.0.2"}).TryWS(t.Context(), p.WS("/api/ws"))
		if err != nil {
			refused++
			continue
		}
		ok++
		open = append(open, c)
	}
	for _, c := range open {
		c.Close()
	}
	t.Logf("1,000 connections from one address on default flags: %d open, %d refused", ok, refused)
}
