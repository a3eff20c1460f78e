package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// page is a history page as clients decode it.
type page struct {
	Topic        string           `json:"topic"`
	Epoch        string           `json:"epoch"`
	Offset       uint64           `json:"offset"`
	Publications []tt.Publication `json:"publications"`
	Next         *struct {
		Before uint64 `json:"before"`
		Epoch  string `json:"epoch"`
	} `json:"next"`
	Op, Code, Reason string
}

// publishMany publishes n publications to topic on node over HTTP, from several goroutines.
func publishMany(t *testing.T, node *testServer, topic string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, code, err := publishHTTP(node, topic, fmt.Sprintf(`{"i":%d}`, i)); err != nil || code != 200 {
					t.Errorf("publish %d: %d %v", i, code, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// walkBack pages back from the newest publication with next, to the end, and returns the
// offsets in the order received.
func walkBack(t *testing.T, next func(before uint64, epoch string) page) []uint64 {
	t.Helper()
	var got []uint64
	before, epoch := uint64(0), ""
	for range 10_000 {
		p := next(before, epoch)
		for _, m := range p.Publications {
			got = append(got, m.Offset)
		}
		if p.Next == nil {
			return got
		}
		before, epoch = p.Next.Before, p.Next.Epoch
	}
	t.Fatal("paging did not end")
	return nil
}

// checkDescending checks got is top, top-1, ..., 1.
func checkDescending(t *testing.T, what string, got []uint64, top uint64) {
	t.Helper()
	if uint64(len(got)) != top {
		t.Errorf("%s: %d publications, want %d", what, len(got), top)
	}
	for i, o := range got {
		if o != top-uint64(i) {
			t.Fatalf("%s: position %d holds offset %d, want %d (a gap or a duplicate)", what, i, o, top-uint64(i))
		}
	}
}

func pageHTTP(t *testing.T, n *testServer, topic string, limit int) func(uint64, string) page {
	return func(before uint64, epoch string) page {
		t.Helper()
		var p page
		if code := n.get(t, fmt.Sprintf("/api/topics/%s/history?before=%d&epoch=%s&limit=%d", topic, before, epoch, limit), &p); code != 200 {
			t.Fatalf("history page: %d", code)
		}
		return p
	}
}

func pageWS(t *testing.T, n *testServer, topic string, limit int) func(uint64, string) page {
	c := tt.DialWS(t, n.ws("/api/ws"))
	c.Op("connected")
	id := 0
	return func(before uint64, epoch string) page {
		t.Helper()
		id++
		c.Send(fmt.Sprintf(`{"op":"history","id":%d,"topic":%q,"before":%d,"epoch":%q,"limit":%d}`, id, topic, before, epoch, limit))
		b, err := c.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("ws history: %v", err)
		}
		var p page
		if err := json.Unmarshal(b, &p); err != nil || p.Op != "history" {
			t.Fatalf("ws history answer %s: %v", b, err)
		}
		return p
	}
}

func pageSTOMP(t *testing.T, n *testServer, topic string, limit int) func(uint64, string) page {
	c := tt.DialSTOMP(t, n.ws("/api/stomp"))
	c.Send("CONNECT\naccept-version:1.2\n\n\x00")
	c.Expect("CONNECTED")
	id := 0
	return func(before uint64, epoch string) page {
		t.Helper()
		id++
		c.Send(fmt.Sprintf("SUBSCRIBE\nid:h%d\ndestination:/history/%s\nbefore:%d\nepoch:%s\nlimit:%d\n\n\x00", id, topic, before, epoch, limit))
		f := c.Expect("MESSAGE")
		var p page
		if err := json.Unmarshal(f.Body, &p); err != nil {
			t.Fatalf("stomp history body %s: %v", f.Body, err)
		}
		nb, ok := f.Get("next-before")
		if (p.Next != nil) != ok || (ok && nb != strconv.FormatUint(p.Next.Before, 10)) {
			t.Fatalf("next-before header %q does not match the body's next %+v", nb, p.Next)
		}
		c.Send(fmt.Sprintf("UNSUBSCRIBE\nid:h%d\n\n\x00", id))
		return p
	}
}

// archivedLive reads the node's rtlab_archive_written_total{path} from /metrics.
func archivedMetric(t *testing.T, n *testServer, path string) float64 {
	t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	prefix := `rtlab_archive_written_total{path="` + path + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestHistoryPaging: 5,000 messages in a room whose window holds 1,000 (the rest in the
// embedded archive); paging back from the newest reaches offset 1 with no gap or duplicate over
// HTTP, WebSocket and STOMP, and a client that may not subscribe may not page either.
func TestHistoryPaging(t *testing.T) {
	const topic, total = "room/paged", 5000
	n := startServer(t, func(c *Config) {
		c.DataDir, c.Durable, c.DurableHistory = t.TempDir(), []string{"room/"}, 1000
	})
	publishMany(t, n, topic, total)
	eventually.True(t, 30*time.Second, "every publication archived", func() bool { return archivedMetric(t, n, "live") >= total })
	checkDescending(t, "HTTP", walkBack(t, pageHTTP(t, n, topic, 97)), total)
	checkDescending(t, "WebSocket", walkBack(t, pageWS(t, n, topic, 100)), total)
	checkDescending(t, "STOMP", walkBack(t, pageSTOMP(t, n, topic, 250)), total)

	// The window alone: the first page of 50 is the newest, and names the next.
	p := pageHTTP(t, n, topic, 50)(0, "")
	if len(p.Publications) != 50 || p.Publications[0].Offset != total || p.Next == nil || p.Next.Before != total-49 || p.Offset != total {
		t.Fatalf("newest page: %d publications from %d, next %+v, top %d", len(p.Publications), p.Publications[0].Offset, p.Next, p.Offset)
	}
	if p.Publications[0].Data == nil || p.Publications[0].Time == "" {
		t.Fatalf("page publication lacks data or time: %+v", p.Publications[0])
	}
	// Bad input gets a clear answer on each transport.
	var e struct{ Error, Reason string }
	if code := n.get(t, "/api/topics/"+topic+"/history?before=x", &e); code != 400 || e.Error != "bad_request" {
		t.Fatalf("before=x: %d %+v", code, e)
	}
	if code := n.get(t, "/api/topics/"+topic+"/history?before=5&limit=5000", &e); code != 400 {
		t.Fatalf("limit=5000: %d %+v", code, e)
	}
	c := tt.DialWS(t, n.ws("/api/ws"))
	c.Op("connected")
	c.Send(`{"op":"history","topic":"bad topic!","id":1}`)
	if m := c.Msg(); m.Op != "error" || m.Code != "bad_topic" {
		t.Fatalf("ws bad topic: %+v", m)
	}
}

// TestPagingNeedsSubscribePermission checks the three transports refuse a page of a topic the
// client may not subscribe to: notify/{user} of another user, in open dev mode.
func TestPagingNeedsSubscribePermission(t *testing.T) {
	n := startServer(t, nil)
	var login struct{ Token string }
	if code := n.post(t, "/api/login", `{"user":"bob"}`, &login); code != 200 {
		t.Fatalf("login: %d", code)
	}
	var e struct{ Error, Reason string }
	code, body := do(t, n, "GET", "/api/topics/notify/ann/history?before=0&access_token="+login.Token, "", "")
	if code != 403 || json.Unmarshal([]byte(body), &e) != nil || e.Error != "forbidden" {
		t.Fatalf("HTTP page of another's notifications: %d %s", code, body)
	}
	c := tt.DialWS(t, n.ws("/api/ws?access_token="+login.Token))
	c.Op("connected")
	c.Send(`{"op":"history","topic":"notify/ann","id":1}`)
	if m := c.Msg(); m.Op != "error" || m.Code != "forbidden" {
		t.Fatalf("ws page of another's notifications: %+v", m)
	}
	s := tt.DialSTOMP(t, n.ws("/api/stomp"))
	s.Send("CONNECT\naccept-version:1.2\npasscode:" + login.Token + "\n\n\x00SUBSCRIBE\nid:1\ndestination:/history/notify/ann\n\n\x00")
	s.Expect("CONNECTED")
	if f := s.Frame(5 * time.Second); f.Command != "ERROR" {
		t.Fatalf("stomp page of another's notifications: %s", f.Command)
	}
}

// externalBrokers are the shared brokers, each with the starter of its server.
var externalBrokers = []struct {
	name  string
	start func(testing.TB) *brokertest.Server
}{
	{"redis", brokertest.StartRedis},
	{"nats", brokertest.StartNATS},
	{"amqp", brokertest.StartRabbit},
}

// TestDurableHistoryMultiNode: two nodes on each broker with a --history-ttl of 1 s share a
// PostgreSQL archive; a room (durable, a window of 20) keeps its window on both nodes after other
// topics expired, and pages back through the window and the archive to its first message.
func TestDurableHistoryMultiNode(t *testing.T) {
	for _, bk := range externalBrokers {
		t.Run(bk.name, func(t *testing.T) {
			srv := bk.start(t)
			pg := brokertest.StartPostgres(t)
			node := func() *testServer {
				return startServer(t, func(c *Config) {
					c.Broker, c.HistoryTTL, c.HistorySize = srv.URL, time.Second, 10
					c.Durable, c.DurableHistory, c.Archive = []string{"room/"}, 20, pg.URL
					c.Logger = brokertest.Logger()
				})
			}
			nodes := []*testServer{node(), node()}
			for i := range 60 {
				if _, code, err := publishHTTP(nodes[i%2], "room/kept", fmt.Sprintf(`{"i":%d}`, i)); err != nil || code != 200 {
					t.Fatalf("publish: %d %v", code, err)
				}
			}
			if _, code, _ := publishHTTP(nodes[0], "news/brief", `{}`); code != 200 {
				t.Fatalf("publish news: %d", code)
			}
			eventually.True(t, 20*time.Second, "news/brief expired", func() bool {
				var a tt.PollAnswer
				nodes[1].get(t, "/api/poll/news/brief?since=0", &a)
				return len(a.Publications) == 0
			})
			eventually.True(t, 20*time.Second, "every publication archived", func() bool {
				return archivedMetric(t, nodes[0], "live")+archivedMetric(t, nodes[1], "live") >= 60
			})
			for i, n := range nodes {
				var a tt.PollAnswer
				if code := n.get(t, "/api/topics/room/kept/history?since=40&limit=1000", &a); code != 200 || len(a.Publications) != 20 || !a.Recovered {
					t.Fatalf("node %d: room window after the TTL: %d, %d publications, recovered %v", i, code, len(a.Publications), a.Recovered)
				}
				checkDescending(t, fmt.Sprintf("node %d paging", i), walkBack(t, pageHTTP(t, n, "room/kept", 7)), 60)
			}
		})
	}
}

// rtlabBinary builds cmd/rtlab once for the tests that run nodes as processes of their own.
var rtlabBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "rtlab-bin-")
	if err != nil {
		return "", err
	}
	return servertest.Build(dir)
})

// TestArchiveKeepsEveryAcknowledged: two nodes on each broker share a PostgreSQL archive while
// clients publish to a room on both. PostgreSQL stops mid-stream; one node is killed (SIGKILL)
// with what it acknowledged meanwhile still queued; PostgreSQL comes back. Afterwards the
// archive holds every acknowledged publication exactly once: the surviving node caught up the
// dead one's from the broker's window.
func TestArchiveKeepsEveryAcknowledged(t *testing.T) {
	for _, bk := range externalBrokers {
		t.Run(bk.name, func(t *testing.T) {
			srv := bk.start(t)
			pg := brokertest.StartPostgres(t)
			const topic = "room/kept"
			bin, err := rtlabBinary()
			if err != nil {
				t.Fatal(err)
			}
			proc := servertest.Start(t, bin, "--broker", srv.URL, "--durable", "room/", "--durable-history", "2000",
				"--archive", pg.URL, "--archive-sweep", "200ms", "--archive-grace", "1s", "--msg-rate", "-1")
			proc.Await("/readyz", http.StatusOK, 60*time.Second)
			killed := &testServer{Server: &httptest.Server{URL: proc.URL()}}
			alive := startServer(t, func(c *Config) {
				c.Broker, c.Durable, c.DurableHistory, c.Archive = srv.URL, []string{"room/"}, 2000, pg.URL
				c.ArchiveSweep, c.ArchiveGrace = 200*time.Millisecond, time.Second
				c.DataDir = t.TempDir()
				c.Logger = brokertest.Logger()
			})
			var (
				mu    sync.Mutex
				acks  []tt.Position
				stop  = make(chan struct{})
				wg    sync.WaitGroup
				count = func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
			)
			for w, n := range []*testServer{killed, alive, alive} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						pos, code, err := publishHTTP(n, topic, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
						if err != nil && n == killed {
							return // the node is gone
						}
						if code == 200 {
							mu.Lock()
							acks = append(acks, pos)
							mu.Unlock()
						}
					}
				}()
			}
			await := func(n int, what string) {
				eventually.True(t, 30*time.Second, what, func() bool { return count() >= n })
			}
			await(100, "publications before PostgreSQL stops")
			pg.Stop()
			await(count()+150, "publications while PostgreSQL is down")
			proc.Kill()
			await(count()+50, "publications after the node died")
			pg.Start()
			await(count()+100, "publications after PostgreSQL is back")
			close(stop)
			wg.Wait()

			mu.Lock()
			want := append([]tt.Position(nil), acks...)
			mu.Unlock()
			conn, err := pgx.Connect(context.Background(), pg.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var rows, distinct int
			eventually.True(t, 60*time.Second, "every acknowledged publication archived", func() bool {
				have := map[tt.Position]bool{}
				rs, err := conn.Query(context.Background(), `SELECT "offset", epoch FROM rtlab_archive WHERE topic = $1`, topic)
				if err != nil {
					return false
				}
				rows = 0
				for rs.Next() {
					var p tt.Position
					var off int64
					if rs.Scan(&off, &p.Epoch) == nil {
						p.Offset = uint64(off)
						have[p] = true
						rows++
					}
				}
				rs.Close()
				distinct = len(have)
				for _, p := range want {
					if !have[p] {
						return false
					}
				}
				return true
			})
			if rows != distinct {
				t.Fatalf("archive holds %d rows for %d publications", rows, distinct)
			}
			caught := archivedMetric(t, alive, "catchup")
			t.Logf("%d acknowledged, %d archived, %.0f of them caught up by the surviving node", len(want), rows, caught)
			if caught == 0 {
				t.Errorf("nothing was caught up: the dead node's queued publications were not exercised")
			}
			// Every archived publication pages back from the surviving node, window then archive.
			top := agreedTop(t, topic, []*testServer{alive})
			got := walkBack(t, pageHTTP(t, alive, topic, 500))
			checkDescending(t, "paging after the outage", got, top.Offset)
		})
	}
}

// TestArchiveFlags: bad --archive and --archive-retention values are refused at start with the
// flag named, and the start line says where the archive is.
func TestArchiveFlags(t *testing.T) {
	base := Config{DataDir: t.TempDir(), Durable: []string{"chat/"}, DurableHistory: 1000}
	for _, c := range []struct {
		archive, retention, want string
	}{
		{"mysql://x", "", "--archive"},
		{"", "500", "--archive-retention 500"},
		{"", "soon", "--archive-retention"},
	} {
		cfg := base
		cfg.Archive, cfg.ArchiveRetention = c.archive, c.retention
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--archive %q --archive-retention %q: %v, want an error naming %s", c.archive, c.retention, err, c.want)
		}
	}
	a, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	defer a.closeStore()
	if !strings.Contains(a.archDesc, "archive.db") {
		t.Fatalf("memory broker's default archive: %q", a.archDesc)
	}
}
