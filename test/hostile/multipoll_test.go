package hostile

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
)

// multiPollBody asks for every topic from the positions in since.
func multiPollBody(topics []string, since map[string]uint64) string {
	var b strings.Builder
	b.WriteString(`{"limit":1000,"topics":[`)
	for i, topic := range topics {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"topic":%q,"since":%d}`, topic, since[topic])
	}
	b.WriteString("]}")
	return b.String()
}

// TestMultiPollAnswerBounded: 20 topics full of 60 KB messages, and 16 clients asking for all
// of them with POST /api/poll that never read their answers. Each answer was built whole (about
// 48 MB here) and held while the client did not read; now an answer holds at most
// --poll-answer-bytes (1 MiB) and RSS stays bounded (16 whole answers: 768 MB). A client that reads gets every message,
// in order, over several polls ("more"), and a bystander is served.
func TestMultiPollAnswerBounded(t *testing.T) {
	p, b := startWithBystander(t, "news/multipoll", "--http-pub-rate", "-1", "--write-timeout", "3s")
	var topics []string
	for i := range 20 {
		topics = append(topics, fillBig(t, p, fmt.Sprintf("news/mp%d", i), 40, 60<<10).topic)
	}
	// The first read encodes each publication once, as any delivery would, and the encoding
	// stays with it in history: the base is taken after.
	polls, more := readCapped(t, p.URL(), topics, 40)
	t.Logf("%d messages of 60 KB in %d capped polls", 20*40, polls)
	if !more || polls < 40 {
		t.Fatalf("%d polls for 48 MB, more=%v: answers not capped at 1 MiB", polls, more)
	}
	base := p.RSS()
	all := multiPollBody(topics, nil)
	for range 16 { // never read
		conn, _ := rawConn(t, p.Addr, attacker)
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "POST /api/poll HTTP/1.1\r\nHost: rtlab\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(all), all)
	}
	readCapped(t, p.URL(), topics, 40) // served meanwhile, after the 16 requests
	growth(t, p, base, 128*mib, "16 clients not reading 20 topics x 40 x 60 KB")
	check(t, b, 20)
}

// readCapped reads every publication of topics (n each) through POST /api/poll from their
// start, checking order, and returns how many polls it took and whether one said "more".
func readCapped(t *testing.T, url string, topics []string, n int) (polls int, more bool) {
	t.Helper()
	hc := httpFrom(attacker2)
	since := map[string]uint64{}
	got := 0
	eventually.True(t, 120*time.Second, "every message through capped answers", func() bool {
		polls++
		code, _, body := post(t, hc, url+"/api/poll", []byte(multiPollBody(topics, since)))
		var ans struct {
			Topics []struct {
				Topic        string `json:"topic"`
				Publications []struct {
					Offset uint64          `json:"offset"`
					Data   json.RawMessage `json:"data"`
				} `json:"publications"`
			} `json:"topics"`
			More bool `json:"more"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &ans) != nil {
			t.Fatalf("poll %d: %d %.200s", polls, code, body)
		}
		more = more || ans.More
		for _, a := range ans.Topics {
			for _, pub := range a.Publications {
				if pub.Offset != since[a.Topic]+1 || !strings.Contains(string(pub.Data), fmt.Sprintf(`"n":%d,`, pub.Offset-1)) {
					t.Fatalf("%s: offset %d after %d", a.Topic, pub.Offset, since[a.Topic])
				}
				since[a.Topic] = pub.Offset
				got++
			}
		}
		return got == len(topics)*n
	})
	return polls, more
}
