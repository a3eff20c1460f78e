package hostile

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// talkFlood is 30 WebSocket connections from the attacker's address, each ENTERing one chat
// room and then TALKing 3.9 KB at pace a second until ctx ends; tokens names each one's
// token (one for all: one user; "": anonymous). It counts acks and refusals.
type talkFlood struct {
	acked, refused atomic.Int64
	wg             sync.WaitGroup
}

func startTalkFlood(ctx context.Context, t *testing.T, p *servertest.Proc, room string, pace int, token func(i int) (tok, user string)) *talkFlood {
	t.Helper()
	f := &talkFlood{}
	for i := range 30 {
		tok, user := token(i)
		d := tt.Dialer{From: attacker}
		if tok != "" {
			d = d.Bearer(tok)
		}
		c := d.WS(t, p.WS("/api/ws"))
		c.Op("connected")
		talk := string(padded(3900, fmt.Sprintf(`"sender":%q,"message":"x"`, user)))
		c.Send(fmt.Sprintf(`{"op":"publish","topic":%q,"type":"ENTER","data":{"sender":%q}}`, room, user))
		f.wg.Add(2)
		go f.read(c)
		go f.talk(ctx, c, room, talk, pace)
	}
	return f
}

func (f *talkFlood) read(c *tt.WSConn) {
	defer f.wg.Done()
	for {
		b, err := c.Next(30 * time.Second)
		if err != nil {
			return
		}
		switch {
		case strings.Contains(string(b), `"op":"ack"`):
			f.acked.Add(1)
		case strings.Contains(string(b), `"rate_limited"`):
			f.refused.Add(1)
		}
	}
}

// talk sends at pace a second on a schedule (not a sleep per message), so a slow moment is
// caught up as a client's queue would be.
func (f *talkFlood) talk(ctx context.Context, c *tt.WSConn, room, talk string, pace int) {
	defer f.wg.Done()
	defer c.Close()
	msg := fmt.Sprintf(`{"op":"publish","topic":%q,"type":"TALK","data":%s}`, room, talk)
	start := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		if d := time.Until(start.Add(time.Duration(n) * time.Second / time.Duration(pace))); d > 0 {
			time.Sleep(d)
		}
		if c.Write(msg) != nil {
			return
		}
	}
}

// peakMem samples the server's RSS until ctx ends and says its peak, split anonymous/files,
// with the peak of the archive's queue (a second's samples) and the files mapped at the end.
func peakMem(ctx context.Context, p *servertest.Proc) func() string {
	var rss, anon, file int64
	var queued float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			st := msStatus(p.PID())
			rss, anon, file = max(rss, st["VmRSS"]), max(anon, st["RssAnon"]), max(file, st["RssFile"])
			if i%5 == 0 {
				queued = max(queued, msMetric(p, "rtlab_archive_queue"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() string {
		<-done
		return fmt.Sprintf("peak RSS %.0f MiB (anonymous %.0f, files %.0f: %s), archive queue at most %.0f",
			float64(rss)/1024, float64(anon)/1024, float64(file)/1024, mappedFiles(p.PID()), queued)
	}
}

// mappedFiles says the resident MiB of each data file pid maps (smaps), the binary left out.
func mappedFiles(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	kb := map[string]int64{}
	var cur string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 6 && strings.Contains(f[0], "-") && strings.HasSuffix(f[5], ".db"):
			cur = filepath.Base(f[5])
		case len(f) >= 5 && strings.Contains(f[0], "-"):
			cur = ""
		case cur != "" && len(f) == 3 && f[0] == "Rss:":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			kb[cur] += n
		}
	}
	var out []string
	for name, n := range kb {
		out = append(out, fmt.Sprintf("%s %.0f", name, float64(n)/1024))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestMeasureTalkFlood: 30 connections of one user, of 30 users from one address, and anonymous
// from one address, each TALKing 3.9 KB at 95/s into one chat room for 20 s.
func TestMeasureTalkFlood(t *testing.T) {
	b := measured(t)
	cases := []struct {
		name  string
		token func(i int) (string, string)
	}{
		{"one user", func(int) (string, string) { return msMint("eve"), "eve" }},
		{"30 users", func(i int) (string, string) { u := fmt.Sprintf("eve%d", i); return msMint(u), u }},
		{"anonymous", func(int) (string, string) { return "", "eve" }},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			args := []string{"--auth-secret", secret}
			if tc.name == "anonymous" {
				args = nil
			}
			p := servertest.Start(t, b, args...)
			by := ""
			if args != nil {
				by = msMint("by")
			}
			base := msP99(t, p, by, 100)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			peak := peakMem(ctx, p)
			f := startTalkFlood(ctx, t, p, "chat/flood", 95, tc.token)
			load := msLoad(t, p.PID())
			time.Sleep(3 * time.Second)
			during := msP99(t, p, by, 600)
			cpu := load()
			<-ctx.Done()
			f.wg.Wait()
			t.Logf("%s: %s; bystander p99 %v (before %v); TALKs acked %d, refused %d; %s; after: %s",
				tc.name, peak(), during, base, f.acked.Load(), f.refused.Load(), cpu, msMem(p))
		})
	}
}

// publishUntilRefused publishes TALKs round-robin over conns (small ones: the count matters)
// after an ENTER until a publish is refused as over --user-msg-rate, or n were sent; it reads
// every answer and returns how many TALKs were acked and refused so.
func publishUntilRefused(t *testing.T, conns []*tt.WSConn, room, sender string, n int) (acked, refused int) {
	t.Helper()
	conns[0].Send(fmt.Sprintf(`{"op":"publish","topic":%q,"type":"ENTER","data":{"sender":%q},"id":"enter"}`, room, sender))
	if m := conns[0].Until(`"id":`, 30*time.Second); !strings.Contains(m, `"op":"ack"`) {
		t.Fatalf("ENTER answered %s", m)
	}
	talk := fmt.Sprintf(`{"op":"publish","topic":%q,"type":"TALK","data":{"sender":%q,"message":"hi"},"id":%%d}`, room, sender)
	for i := 0; i < n && refused == 0; i += len(conns) {
		for j, c := range conns {
			c.Send(fmt.Sprintf(talk, i+j))
		}
		for _, c := range conns {
			switch m := c.Until(`"id":`, 30*time.Second); {
			case strings.Contains(m, `"op":"ack"`):
				acked++
			case strings.Contains(m, `"rate_limited"`) && strings.Contains(m, "--user-msg-rate"):
				refused++
			default:
				t.Fatalf("publish answered %s", m)
			}
		}
	}
	return acked, refused
}

// TestUserMsgRateAcrossConnections: 30 connections of one user, each under --msg-rate, together
// published 30 times it (a TALK flood of ~2,850/s into one durable room). Now the user's
// publishes over all its WebSocket and STOMP connections share --user-msg-rate: over it a
// publish is refused rate_limited (STOMP: ERROR, a transaction whole), while another user from
// the same address publishes and the bystander is served.
func TestUserMsgRateAcrossConnections(t *testing.T) {
	p := authed(t, "--user-msg-rate", "1")
	b := servertest.StartBystander(t, p, "news/usermsg", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	eve := mint(t, "eve", time.Hour)
	var conns []*tt.WSConn
	for range 4 {
		c := dialer("", attacker, nil).Bearer(eve).WS(t, p.WS("/api/ws"))
		c.Op("connected")
		conns = append(conns, c)
	}
	acked, refused := publishUntilRefused(t, conns, "chat/usermsg", "eve", 2000)
	t.Logf("eve on 4 connections: %d acked, then refused", acked)
	if refused == 0 {
		t.Fatalf("%d publishes of one user at --user-msg-rate 1 (burst 10): none refused", acked)
	}
	// STOMP shares the user's tokens: a SEND over the rate ends the session with an ERROR.
	st := stompAs(t, p, eve)
	for i := range 50 {
		if st.Write(fmt.Sprintf("SEND\ndestination:/topic/chat/usermsg\ntype:TALK\n\n{\"sender\":\"eve\",\"message\":\"%d\"}\x00", i)) != nil {
			break
		}
	}
	if f := stompFrame(t, st, "ERROR"); !strings.Contains(f, "--user-msg-rate") {
		t.Fatalf("STOMP over the user's rate: %s", f)
	}
	// A transaction of more SENDs than the user's burst is refused whole.
	tx := stompAs(t, p, eve)
	tx.Send("BEGIN\ntransaction:t\n\n\x00")
	for i := range 20 {
		tx.Send(fmt.Sprintf("SEND\ndestination:/topic/chat/usermsg\ntype:TALK\ntransaction:t\n\n{\"sender\":\"eve\",\"message\":\"%d\"}\x00", i))
	}
	tx.Send("COMMIT\ntransaction:t\n\n\x00")
	if f := stompFrame(t, tx, "ERROR"); !strings.Contains(f, "--user-msg-rate") {
		t.Fatalf("a COMMIT of 20 SENDs over the user's burst of 10: %s", f)
	}
	// Another user from the same address has tokens of its own.
	bob := dialer("", attacker, nil).Bearer(mint(t, "bob", time.Hour)).WS(t, p.WS("/api/ws"))
	bob.Op("connected")
	if acked, refused := publishUntilRefused(t, []*tt.WSConn{bob}, "chat/usermsg", "bob", 1); acked != 1 || refused != 0 {
		t.Fatalf("bob's first publish: %d acked, %d refused", acked, refused)
	}
	check(t, b, 20)
}

// TestAnonymousMsgRatePerAddress: anonymous connections from one address (WebSocket, STOMP over
// TCP) share --user-msg-rate; one from another address keeps its own, and the bystander is
// served.
func TestAnonymousMsgRatePerAddress(t *testing.T) {
	stompAddr := servertest.FreeAddr(t)
	p, b := startWithBystander(t, "news/anonmsg", "--user-msg-rate", "1", "--stomp-addr", stompAddr)
	var conns []*tt.WSConn
	for range 4 {
		c := dialWS(t, p.WS("/api/ws"), attacker, nil)
		c.Op("connected")
		conns = append(conns, c)
	}
	if acked, refused := publishUntilRefused(t, conns, "chat/anonmsg", "eve", 2000); refused == 0 {
		t.Fatalf("%d anonymous publishes from one address at --user-msg-rate 1: none refused", acked)
	}
	// STOMP over TCP from that address shares its bucket.
	var conn net.Conn
	eventually.Nil(t, 10*time.Second, func() (err error) {
		conn, err = dialerFrom(attacker).Dial("tcp", stompAddr)
		return err
	})
	defer conn.Close()
	br := bufio.NewReader(conn)
	fmt.Fprint(conn, "CONNECT\naccept-version:1.2\nhost:rtlab\n\n\x00")
	for i := range 50 {
		fmt.Fprintf(conn, "SEND\ndestination:/topic/news/anon-tcp\n\n{\"n\":%d}\x00", i)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := br.ReadString(0)
		if err != nil {
			t.Fatalf("STOMP over TCP: no ERROR for --user-msg-rate: %v", err)
		}
		if f = strings.TrimLeft(f, "\r\n"); strings.HasPrefix(f, "ERROR\n") {
			if !strings.Contains(f, "--user-msg-rate") {
				t.Fatalf("STOMP over TCP: %s", f)
			}
			break
		}
	}
	other := dialWS(t, p.WS("/api/ws"), "127.0.0.1", nil)
	other.Op("connected")
	if acked, refused := publishUntilRefused(t, []*tt.WSConn{other}, "chat/anonmsg", "ann", 1); acked != 1 || refused != 0 {
		t.Fatalf("another address's first publish: %d acked, %d refused", acked, refused)
	}
	check(t, b, 20)
}
