package hostile

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestLongPollsCountPerUser: with auth on, a waiting long poll counted toward its address's
// cap only, so one user could hold any number of them from many addresses. It now counts
// toward --max-conns-per-user too, whichever address it comes from and on either route
// (GET /api/poll/{topic}?wait, POST /api/poll); another user on the same address is served.
func TestLongPollsCountPerUser(t *testing.T) {
	p := authed(t, "--max-conns-per-user", "3")
	b := servertest.StartBystander(t, p, "news/polls", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	eve := tt.Dialer{From: attacker}.Bearer(mint(t, "eve", time.Hour))
	eve2 := tt.Dialer{From: attacker2}.Bearer(mint(t, "eve", time.Hour))
	var wg sync.WaitGroup
	defer wg.Wait()
	hold := func(d tt.Dialer, method, path, body string) {
		wg.Add(1)
		go func() { defer wg.Done(); d.Call(t, method, p.URL()+path, body) }()
	}
	hold(eve, "GET", "/api/poll/news/polls-eve?wait=15s", "")
	hold(eve, "GET", "/api/poll/news/polls-eve?wait=15s", "")
	hold(eve2, "POST", "/api/poll", `{"topics":[{"topic":"news/polls-eve","since":0}],"wait":15}`)
	eventually.Nil(t, 10*time.Second, func() error {
		if n := metric(t, p, `rtlab_connections{transport="longpoll"}`); n < 3 {
			return fmt.Errorf("%v long polls waiting, want 3", n)
		}
		return nil
	})
	for _, d := range []tt.Dialer{eve, eve2} {
		st, ans := d.Call(t, "GET", p.URL()+"/api/poll/news/polls-eve?wait=15s", "")
		if code, reason := refusal(t, ans); st != http.StatusTooManyRequests || code != "too_many_connections" || !strings.Contains(reason, "--max-conns-per-user") {
			t.Fatalf("eve's 4th long poll: %d %s, want 429 naming --max-conns-per-user", st, ans)
		}
	}
	// Another user on eve's address is served: its long poll answers with the publication.
	bob := tt.Dialer{From: attacker}.Bearer(mint(t, "bob", time.Hour))
	got := make(chan string, 1)
	go func() {
		st, ans := bob.Call(t, "GET", p.URL()+"/api/poll/news/polls-bob?since=0&wait=10s", "")
		got <- fmt.Sprint(st, " ", string(ans))
	}()
	time.Sleep(200 * time.Millisecond)
	if st, ans := bob.Call(t, "POST", p.URL()+"/api/publish/news/polls-bob", `{"n":1}`); st != http.StatusOK {
		t.Fatalf("bob's publish: %d %s", st, ans)
	}
	if ans := <-got; !strings.HasPrefix(ans, "200 ") || !strings.Contains(ans, `"n":1`) {
		t.Fatalf("bob's long poll beside eve's: %s", ans)
	}
	// Eve's polls end at publication; then she may wait again.
	if st, ans := eve.Call(t, "POST", p.URL()+"/api/publish/news/polls-eve", `{"n":1}`); st != http.StatusOK {
		t.Fatalf("eve's publish: %d %s", st, ans)
	}
	check(t, b, 20)
}

// TestHTTPReadsRateLimited: polls and history reads had no rate of their own, so one user
// (or address) could make the server read history as fast as it could send requests. Each now
// takes a token of the user's --read-rate-per-user; a user past it gets 429 rate_limited with a reason
// (the answer held until it could retry), while another user on the same address, and the
// bystander, are served. Anonymous reads take the address's, of --read-rate-per-ip per second.
func TestHTTPReadsRateLimited(t *testing.T) {
	p := authed(t, "--read-rate-per-user", "20")
	b := servertest.StartBystander(t, p, "news/reads", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	eve := tt.Dialer{From: attacker}.Bearer(mint(t, "eve", time.Hour))
	hc := eve.HTTP()
	paths := []string{"/api/poll/news/reads?since=0", "/api/topics/news/reads/history", "/api/topics/news/reads/presence"}
	ok, limited := 0, 0
	start := time.Now()
	for i := 0; i < 120; i++ {
		req, _ := http.NewRequest("GET", p.URL()+paths[i%len(paths)], nil)
		req.Header = eve.Header.Clone()
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(res)
		switch res.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if code, reason := refusal(t, []byte(body)); code != "rate_limited" || !strings.Contains(reason, "--read-rate-per-user") || res.Header.Get("Retry-After") == "" {
				t.Fatalf("429 without a rate_limited reason naming --read-rate-per-user, or Retry-After: %v %s", res.Header, body)
			}
		default:
			t.Fatalf("read %d: %d %s", i, res.StatusCode, body)
		}
	}
	elapsed := time.Since(start)
	t.Logf("120 reads by one user in %v: %d served, %d refused", elapsed.Round(time.Millisecond), ok, limited)
	if most := 40 + int(elapsed.Seconds()*20) + 5; limited == 0 || ok > most {
		t.Fatalf("%d of 120 reads served in %v, at most %d allowed", ok, elapsed, most)
	}
	// Refusals are held until a token is due: the flood did not run at the client's speed.
	if elapsed < time.Duration(limited)*20*time.Millisecond {
		t.Fatalf("%d refusals in %v: not held", limited, elapsed)
	}
	// Another user from the same address reads at once.
	bob := tt.Dialer{From: attacker}.Bearer(mint(t, "bob", time.Hour))
	if st, ans := bob.Call(t, "GET", p.URL()+"/api/topics/news/reads/history", ""); st != http.StatusOK {
		t.Fatalf("bob's history read beside eve's flood: %d %s", st, ans)
	}
	check(t, b, 20)

	// Anonymous (open dev mode): the address's rate, here 10/s.
	q := servertest.Start(t, bin, "--read-rate-per-ip", "10")
	anon := httpFrom(attacker)
	limited = 0
	for i := 0; i < 60 && limited == 0; i++ {
		st, _, ans := get(t, anon, q.URL()+"/api/topics/news/anon/history")
		if st == http.StatusTooManyRequests {
			limited++
			if code, reason := refusal(t, ans); code != "rate_limited" || !strings.Contains(reason, "--read-rate-per-ip") {
				t.Fatalf("anonymous reads over the address's rate: %s", ans)
			}
		}
	}
	if limited == 0 {
		t.Fatal("60 anonymous reads from one address, none refused at 10/s")
	}
	if st, _, ans := get(t, httpFrom("127.0.0.1"), q.URL()+"/api/topics/news/anon/history"); st != http.StatusOK {
		t.Fatalf("another address's read: %d %s", st, ans)
	}
}

// readAll reads and closes an answer's body.
func readAll(res *http.Response) string {
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
