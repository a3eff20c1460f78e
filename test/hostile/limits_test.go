package hostile

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// startWithBystander starts a server with flags and a bystander on topic that publishes every
// 20 ms; the caller ends with check.
func startWithBystander(t *testing.T, topic string, flags ...string) (*servertest.Proc, *servertest.Bystander) {
	t.Helper()
	p := servertest.Start(t, bin, flags...)
	return p, servertest.StartBystander(t, p, topic, "", 20*time.Millisecond)
}

// stompConnect opens a STOMP session over WebSocket from the attacker's address.
func stompConnect(t *testing.T, p *servertest.Proc) *tt.WSConn {
	t.Helper()
	c := dialWS(t, p.WS("/api/stomp"), attacker, nil)
	c.Send("CONNECT\naccept-version:1.2\nhost:rtlab\n\n\x00")
	stompFrame(t, c, "CONNECTED")
	return c
}

// growth fails the test when the server's RSS grew by more than limit since base.
func growth(t *testing.T, p *servertest.Proc, base, limit int64, what string) {
	t.Helper()
	rss := p.RSS()
	t.Logf("%s: RSS %d MiB -> %d MiB", what, base/mib, rss/mib)
	if rss-base > limit {
		t.Fatalf("%s: RSS grew by %d MiB, bound %d MiB", what, (rss-base)/mib, limit/mib)
	}
}

// TestStompTransactionBounded: BEGIN, then 3,000 SENDs of 60 KB in the transaction. The
// server held them all before (20 -> 287 MiB); now the transaction is refused with an ERROR
// once it would hold more than --stomp-tx-bytes (1 MiB), and so is a 17th open transaction.
func TestStompTransactionBounded(t *testing.T) {
	p, b := startWithBystander(t, "news/tx")
	base := p.RSS()
	c := stompConnect(t, p)
	c.Send("BEGIN\ntransaction:t1\n\n\x00")
	body := string(padded(60<<10, `"n":1`))
	// Each SEND asks for a receipt and waits for it, so the server has nothing unread when it
	// refuses and closes (unread bytes would turn its close into a reset that eats the ERROR).
	sent, errFrame := 0, ""
	for ; sent < 3000 && errFrame == ""; sent++ {
		c.Send(fmt.Sprintf("SEND\ndestination:/topic/news/tx-flood\ntransaction:t1\nreceipt:r%d\ncontent-type:application/json\n\n%s\x00", sent, body))
		if f := stompFrame(t, c, ""); strings.HasPrefix(f, "ERROR\n") {
			errFrame = f
		} else if !strings.HasPrefix(f, "RECEIPT\n") {
			t.Fatalf("SEND %d: %q", sent, firstLine(f, 1))
		}
	}
	if !strings.Contains(errFrame, "transaction") || !strings.Contains(errFrame, "--stomp-tx-bytes") {
		t.Fatalf("ERROR does not say which limit: %q", errFrame)
	}
	t.Logf("socket refused after %d SENDs: %s", sent, firstLine(errFrame, 1))
	growth(t, p, base, 64*mib, "3,000 x 60 KB in a transaction")

	// Transactions per session: 16 open, the 17th refused.
	c2 := stompConnect(t, p)
	for i := 1; i <= 16; i++ {
		c2.Send(fmt.Sprintf("BEGIN\ntransaction:t%d\nreceipt:r%d\n\n\x00", i, i))
		stompFrame(t, c2, "RECEIPT")
	}
	c2.Send("BEGIN\ntransaction:t17\n\n\x00")
	if f := stompFrame(t, c2, "ERROR"); !strings.Contains(f, "--stomp-tx-max") {
		t.Fatalf("17th transaction: %q", f)
	}
	check(t, b, 20)
}

// TestStompUnackedBounded: an ack:client subscriber reads everything and never ACKs while
// 60 KB messages are published. Held unacknowledged messages are bounded by bytes
// (--stomp-unacked-bytes, 4 MiB) and by count (--stomp-unacked): over either the client is
// disconnected as a slow consumer with a reason.
func TestStompUnackedBounded(t *testing.T) {
	p, b := startWithBystander(t, "news/ack", "--http-pub-rate", "-1", "--stomp-unacked", "100")
	base := p.RSS()
	hc := httpFrom(attacker2)

	sub := stompConnect(t, p)
	sub.Send("SUBSCRIBE\nid:s1\ndestination:/topic/ack/big\nack:client\nreceipt:r\n\n\x00")
	stompFrame(t, sub, "RECEIPT")
	reasons := make(chan string, 1)
	go func() { // reads every MESSAGE, acknowledges none
		for {
			msg, err := sub.Next(30 * time.Second)
			if err != nil {
				reasons <- err.Error()
				return
			}
			if f := string(msg); strings.HasPrefix(f, "ERROR\n") {
				reasons <- f
				return
			}
		}
	}()
	body := padded(60<<10, `"n":1`)
	published := 0
	var reason string
publish:
	for ; published < 3000; published++ {
		select {
		case reason = <-reasons:
			break publish
		default:
		}
		if st, _, ans := post(t, hc, p.URL()+"/api/publish/ack/big", body); st != http.StatusOK {
			t.Fatalf("publish %d: %d %s", published, st, ans)
		}
	}
	if reason == "" {
		reason = <-reasons
	}
	if !strings.Contains(reason, "slow_consumer") || !strings.Contains(reason, "unacknowledged") {
		t.Fatalf("subscriber was not cut off as a slow consumer with a reason: %q", reason)
	}
	t.Logf("60 KB messages: cut off after %d publishes: %s", published, firstLine(reason, 1))
	if published > 100 {
		t.Fatalf("cut off only after %d publications of 60 KB; the byte bound is 4 MiB", published)
	}
	growth(t, p, base, 64*mib, "ack:client subscriber that never ACKs")

	// The count bound, with small messages.
	sub2 := stompConnect(t, p)
	sub2.Send("SUBSCRIBE\nid:s2\ndestination:/topic/ack/small\nack:client-individual\nreceipt:r\n\n\x00")
	stompFrame(t, sub2, "RECEIPT")
	for i := 0; i < 101; i++ {
		if st, _, ans := post(t, hc, p.URL()+"/api/publish/ack/small", []byte(`{"n":1}`)); st != http.StatusOK {
			t.Fatalf("publish: %d %s", st, ans)
		}
	}
	if f := stompFrame(t, sub2, "ERROR"); !strings.Contains(f, "100 unacknowledged messages") {
		t.Fatalf("count bound: %q", f)
	}
	check(t, b, 20)
}

// TestLocationGroupBounded: 2,000 members publish 60 KB positions into one group, then
// GET /cur/g1 twice. Each answer was 120 MB and the server reached 1 GB; now a group keeps
// at most --location-bytes (4 MiB) of positions, dropping the least recently heard member.
func TestLocationGroupBounded(t *testing.T) {
	p, b := startWithBystander(t, "news/loc", "--http-pub-rate", "-1")
	hc := httpFrom(attacker)
	cur := func() (int, []byte) {
		res, err := hc.Get(p.URL() + "/cur/g1")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, body
	}
	if st, body := cur(); st != http.StatusOK { // the group is tracked from here on
		t.Fatalf("GET /cur/g1: %d %s", st, body)
	}
	base := p.RSS()
	for i := 0; i < 2000; i++ {
		data := padded(60<<10, fmt.Sprintf(`"member":"m%d"`, i))
		if st, _, ans := post(t, hc, p.URL()+"/api/publish/location/g1", data); st != http.StatusOK {
			t.Fatalf("publish %d: %d %s", i, st, ans)
		}
	}
	for range 2 {
		st, body := cur()
		var ans struct {
			Members []struct{ Member string }
		}
		if st != http.StatusOK || json.Unmarshal(body, &ans) != nil {
			t.Fatalf("GET /cur/g1: %d %.200s", st, body)
		}
		t.Logf("GET /cur/g1: %d bytes, %d members", len(body), len(ans.Members))
		if len(body) > 4*mib+64<<10 || len(ans.Members) == 0 || len(ans.Members) > 70 {
			t.Fatalf("GET /cur/g1 is %d bytes with %d members; the bound is 4 MiB of positions", len(body), len(ans.Members))
		}
		if last := ans.Members[len(ans.Members)-1].Member; last != "m1999" {
			t.Fatalf("the newest member is %q, want m1999 (the least recently heard go first)", last)
		}
	}
	growth(t, p, base, 128*mib, "2,000 members x 60 KB in one group and two reads")
	check(t, b, 20)
}

// TestHTTPPublishRateLimited: 2,000 publishes of 60 KB to new topics from one address were
// all accepted in 1.9 s. Now an address (a user, when authenticated) may publish
// --http-pub-rate (100) per second with a burst of 200; past it the answer is 429 with
// Retry-After and a JSON reason. The bystander, on another address, is not held up.
func TestHTTPPublishRateLimited(t *testing.T) {
	p, b := startWithBystander(t, "news/rate")
	hc := httpFrom(attacker)
	body := padded(60<<10, `"n":1`)
	accepted, limited := 0, 0
	start := time.Now()
	for i := 0; i < 2000; i++ {
		st, hdr, ans := post(t, hc, fmt.Sprintf("%s/api/publish/flood/t%d", p.URL(), i), body)
		switch st {
		case http.StatusOK:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			if limited == 1 {
				code, reason := refusal(t, ans)
				if code != "rate_limited" || !strings.Contains(reason, "--http-pub-rate") || hdr.Get("Retry-After") == "" {
					t.Fatalf("429 without a rate_limited reason or Retry-After: %v %s", hdr, ans)
				}
				t.Logf("refused after %d publishes: Retry-After %s, %s", accepted, hdr.Get("Retry-After"), reason)
			}
		default:
			t.Fatalf("publish %d: %d %s", i, st, ans)
		}
	}
	elapsed := time.Since(start)
	t.Logf("2,000 publishes in %s: %d accepted, %d refused", elapsed.Round(time.Millisecond), accepted, limited)
	// The bucket holds 200 and refills at 100/s while the flood runs.
	if most := 200 + int(elapsed.Seconds()*100) + 10; accepted > most {
		t.Fatalf("%d publishes accepted in %s, at most %d allowed", accepted, elapsed, most)
	}
	check(t, b, 20)
}

// TestInvalidUTF8Refused publishes {"message":"\xff\xfe"} on every route: each refuses it
// (400, a WebSocket error op or close 1007, a STOMP ERROR), nothing is stored, and a subscriber
// of the topic receives only the valid publication that follows.
func TestInvalidUTF8Refused(t *testing.T) {
	p, b := startWithBystander(t, "news/utf8")
	bad := []byte("{\"message\":\"\xff\xfe\"}")
	hc := httpFrom(attacker)
	watch := dialWS(t, p.WS("/api/ws"), attacker2, nil)
	watch.Op("connected")
	watch.Send(`{"op":"subscribe","topic":"location/u8"}`)
	watch.Op("subscribed")

	enter := []byte("{\"type\":\"ENTER\",\"message\":\"\xff\xfe\"}")
	for _, path := range []string{"/api/publish/location/u8", "/location/sse/share?group=u8", "/location/long/u8/notify", "/api/publish/chat/u8"} {
		body := bad
		if strings.Contains(path, "chat") {
			body = enter // anyone may ENTER a room; its text is what is refused
		}
		st, _, ans := post(t, hc, p.URL()+path, body)
		if code, reason := refusal(t, ans); st != http.StatusBadRequest || code != "bad_request" {
			t.Errorf("POST %s: %d %s %s, want 400 bad_request", path, st, code, reason)
		}
	}
	// WebSocket: as a binary frame (JSON that is not UTF-8) the publish is refused with an
	// error op; as a text frame it breaks RFC 6455 and closes the socket with 1007.
	nat := dialWS(t, p.WS("/api/ws"), attacker, nil)
	nat.Op("connected")
	nat.SendBinary([]byte("{\"op\":\"publish\",\"topic\":\"location/u8\",\"data\":{\"message\":\"\xff\xfe\"}}"))
	if e := nat.Op("error"); e.Code != "bad_request" || !strings.Contains(e.Reason, "UTF-8") {
		t.Errorf("binary publish: %v", e)
	}
	nat.Send(`{"op":"ping"}`)
	nat.Op("pong") // still connected after the refusal
	for _, path := range []string{"/ws?group=u8", "/chat"} {
		c := dialWS(t, p.WS(path), attacker, nil)
		if path == "/chat" {
			c.SendBinary([]byte("{\"type\":\"ENTER\",\"roomId\":\"u8\",\"sender\":\"m\",\"message\":\"\xff\xfe\"}"))
		} else {
			c.SendBinary(bad)
		}
		if msg, err := c.Next(10 * time.Second); err != nil || !strings.Contains(string(msg), "UTF-8") {
			t.Errorf("%s binary frame: %q %v, want an error op", path, msg, err)
		}
	}
	txt := dialWS(t, p.WS("/api/ws"), attacker, nil)
	txt.Op("connected")
	txt.RawFrame(ws.Header{Fin: true, OpCode: ws.OpText, Masked: true, Mask: [4]byte{1, 2, 3, 4}}, bad)
	expectClose(t, txt, 1007)
	// STOMP: a SEND whose body is not UTF-8 (in a binary frame) gets an ERROR; in a text
	// frame the socket closes 1007 after an ERROR.
	for _, binaryFrame := range []bool{true, false} {
		st := stompConnect(t, p)
		frame := append([]byte("SEND\ndestination:/topic/location/u8\n\n"), append(bad, 0)...)
		if binaryFrame {
			st.SendBinary(frame)
			if f := stompFrame(t, st, "ERROR"); !strings.Contains(f, "UTF-8") {
				t.Errorf("STOMP SEND in a binary frame: %q", f)
			}
		} else {
			st.RawFrame(ws.Header{Fin: true, OpCode: ws.OpText, Masked: true, Mask: [4]byte{1, 2, 3, 4}}, frame)
			if got := expectClose(t, st, 1007); !strings.Contains(got, "ERROR") {
				t.Errorf("STOMP SEND in a text frame: no ERROR before the close: %q", got)
			}
		}
	}
	// Nothing was stored, and the watcher's next message is the valid one.
	if st, _, ans := post(t, hc, p.URL()+"/api/publish/location/u8", []byte(`{"message":"ok ✓"}`)); st != http.StatusOK {
		t.Fatalf("valid publish: %d %s", st, ans)
	}
	if m := watch.Op("message"); m.Offset != 1 {
		t.Fatalf("the first stored publication is %v, want the valid one at offset 1", m)
	}
	check(t, b, 20)
}

// TestWebSocketFramesRFC6455: frames that break RFC 6455 close the socket with 1002.
func TestWebSocketFramesRFC6455(t *testing.T) {
	p, b := startWithBystander(t, "news/frames")
	mask := [4]byte{9, 8, 7, 6}
	for _, tc := range []struct {
		name string
		h    ws.Header
		p    []byte
	}{
		{"unmasked", ws.Header{Fin: true, OpCode: ws.OpText}, []byte(`{"op":"ping"}`)},
		{"RSV1 without an extension", ws.Header{Fin: true, Rsv: 4, OpCode: ws.OpText, Masked: true, Mask: mask}, []byte(`{"op":"ping"}`)},
		{"ping over 125 bytes", ws.Header{Fin: true, OpCode: ws.OpPing, Masked: true, Mask: mask}, make([]byte, 126)},
		{"fragmented ping", ws.Header{OpCode: ws.OpPing, Masked: true, Mask: mask}, []byte("p")},
		{"reserved opcode", ws.Header{Fin: true, OpCode: 0xB, Masked: true, Mask: mask}, []byte("x")},
	} {
		for _, path := range []string{"/api/ws", "/api/stomp"} {
			c := dialWS(t, p.WS(path), attacker, nil)
			c.RawFrame(tc.h, tc.p)
			expectClose(t, c, 1002)
			t.Logf("%s on %s: closed 1002", tc.name, path)
		}
	}
	check(t, b, 20)
}

// TestOriginChecked: a browser on another site may not open a WebSocket, STOMP or SSE
// connection (it was upgraded on all six routes, and SSE answered
// Access-Control-Allow-Origin: *). The server's own origin, --allowed-origins and, in open dev
// mode, localhost may; a request without Origin (not a browser) is not refused for it.
func TestOriginChecked(t *testing.T) {
	p, b := startWithBystander(t, "news/origin", "--allowed-origins", "https://app.example, https://*.partner.example")
	routes := []string{"/api/ws", "/api/stomp", "/ws", "/location", "/chat", "/stomp/chat"}
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"https://evil.example", false},
		{"null", false},
		{"https://app.example.evil.example", false},
		{"", true},
		{"http://" + p.Addr, true},
		{"https://app.example", true},
		{"https://eu.partner.example", true},
		{"http://localhost:3000", true}, // open dev mode
	} {
		hdr := http.Header{}
		if tc.origin != "" {
			hdr.Set("Origin", tc.origin)
		}
		for _, route := range routes {
			c, st, err := tryWS(p.WS(route), attacker, hdr)
			if tc.ok != (err == nil) {
				t.Errorf("Origin %q on %s: status %d, %v", tc.origin, route, st, err)
			}
			if err == nil {
				c.Close()
			} else if st != http.StatusForbidden || !strings.Contains(err.Error(), "--allowed-origins") {
				t.Errorf("Origin %q on %s: refused with %d %v, want 403 naming --allowed-origins", tc.origin, route, st, err)
			}
		}
		for _, route := range []string{"/api/sse?topic=news/origin", "/location/sse/connect?group=o"} {
			req, _ := http.NewRequest(http.MethodGet, p.URL()+route, nil)
			req.Header = hdr
			res, err := httpFrom(attacker).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			acao := res.Header.Get("Access-Control-Allow-Origin")
			res.Body.Close()
			switch {
			case !tc.ok && (res.StatusCode != http.StatusForbidden || acao != ""):
				t.Errorf("SSE %s from %q: %d, Access-Control-Allow-Origin %q; want 403 and none", route, tc.origin, res.StatusCode, acao)
			case tc.ok && (res.StatusCode != http.StatusOK || acao != tc.origin && tc.origin != ""):
				t.Errorf("SSE %s from %q: %d, Access-Control-Allow-Origin %q; want 200 and the origin itself", route, tc.origin, res.StatusCode, acao)
			}
		}
	}
	check(t, b, 20)
}

// TestSlowClientsTimedOut: a STOMP socket that never sends CONNECT but a heart-beat every
// 300 ms, and a POST whose body trickles in a byte at a time, were both open after 30 s. Now
// the first is closed after --first-frame-timeout, the second answered 408 after
// --body-timeout; SSE and WebSocket streams, long-lived by nature, are not cut.
func TestSlowClientsTimedOut(t *testing.T) {
	p, b := startWithBystander(t, "news/slow", "--first-frame-timeout", "2s", "--body-timeout", "2s")
	c := dialWS(t, p.WS("/api/stomp"), attacker, nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if c.Write("\n") != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	if f := stompFrame(t, c, "ERROR"); !strings.Contains(f, "--first-frame-timeout") {
		t.Fatalf("ERROR does not name the limit: %q", f)
	}
	t.Logf("heart-beats without CONNECT: ERROR after %s", time.Since(start).Round(100*time.Millisecond))

	conn, br := rawConn(t, p.Addr, attacker)
	fmt.Fprintf(conn, "POST /api/publish/news/slow HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", p.Addr)
	answered := make(chan *http.Response, 1)
	go func() {
		res, err := http.ReadResponse(br, nil)
		if err == nil {
			answered <- res
		}
		close(answered)
	}()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	var res *http.Response
trickle:
	for i := 0; i < 200; i++ {
		select {
		case res = <-answered:
			break trickle
		case <-tick.C:
			_, _ = conn.Write([]byte(" "))
		}
	}
	if res == nil {
		t.Fatal("a body trickled a byte every 300 ms was not cut off")
	}
	body, _ := io.ReadAll(res.Body)
	t.Logf("trickled body: %s %v %q", res.Status, res.Header, body)
	if code, reason := refusal(t, body); res.StatusCode != http.StatusRequestTimeout || code != "timeout" || !strings.Contains(reason, "--body-timeout") {
		t.Fatalf("trickled body: %d %s", res.StatusCode, body)
	}
	// The bystander's WebSocket has been open all along, longer than both timeouts.
	check(t, b, 20)
}

// TestConnectionCaps: 200 WebSocket connections from one address were all accepted. Now an
// address may hold --max-conns-per-ip connections (100 here; HTTP keep-alive ones count too)
// and the server --max-conns streaming ones; past them the upgrade is refused (429 / 503,
// Retry-After, a JSON reason), and a closed connection frees its place.
func TestConnectionCaps(t *testing.T) {
	p, b := startWithBystander(t, "news/conns", "--max-conns", "150", "--max-conns-per-ip", "100")
	var open []*tt.WSConn
	refused := 0
	for i := 0; i < 200; i++ {
		c, st, err := tryWS(p.WS("/api/ws"), attacker, nil)
		if err != nil {
			if st != http.StatusTooManyRequests || !strings.Contains(err.Error(), "--max-conns-per-ip") {
				t.Fatalf("connection %d refused with %d %v, want 429 naming --max-conns-per-ip", i, st, err)
			}
			refused++
			continue
		}
		open = append(open, c)
	}
	if len(open) != 100 || refused != 100 {
		t.Fatalf("%d accepted and %d refused from one address, want 100 and 100", len(open), refused)
	}
	// SSE counts too.
	res, err := httpFrom(attacker).Get(p.URL() + "/api/sse?topic=news/conns")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("SSE over the per-address cap: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// So do long polls and short ones: every HTTP connection counts.
	for _, q := range []struct {
		path string
		want int
	}{{"/api/poll/news/conns?wait=5s", http.StatusTooManyRequests}, {"/location/long/c", http.StatusTooManyRequests}, {"/api/poll/news/conns", http.StatusTooManyRequests}} {
		res, err := httpFrom(attacker).Get(p.URL() + q.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != q.want {
			t.Fatalf("GET %s over the per-address cap: %d, want %d", q.path, res.StatusCode, q.want)
		}
	}
	// The global cap: 100 + the bystander's 1, so 49 more from another address, then 503.
	for i := 0; i < 49; i++ {
		c, _, err := tryWS(p.WS("/api/stomp"), attacker2, nil)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", i, attacker2, err)
		}
		open = append(open, c)
	}
	if _, st, err := tryWS(p.WS("/api/stomp"), attacker2, nil); st != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(err), "--max-conns") {
		t.Fatalf("over the global cap: %d %v, want 503 naming --max-conns", st, err)
	}
	// Places are given back as connections close.
	open[0].Close()
	eventually.Nil(t, 10*time.Second, func() error {
		c, _, err := tryWS(p.WS("/api/ws"), attacker, nil)
		if err != nil {
			return fmt.Errorf("a closed connection's place was not given back: %w", err)
		}
		c.Close()
		return nil
	})
	for _, c := range open {
		c.Close()
	}
	check(t, b, 20)
}

// TestAdminAddr: with --admin-addr, /metrics and /lab answer there and not on --addr.
func TestAdminAddr(t *testing.T) {
	admin := servertest.FreeAddr(t)
	p, b := startWithBystander(t, "news/admin", "--admin-addr", admin)
	for _, tc := range []struct {
		url  string
		want int
	}{
		{p.URL() + "/metrics", http.StatusNotFound},
		{p.URL() + "/lab", http.StatusNotFound},
		{"http://" + admin + "/metrics", http.StatusOK},
		{"http://" + admin + "/lab", http.StatusOK},
		{"http://" + admin + "/api/poll/x", http.StatusNotFound},
	} {
		res, err := http.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.url, res.StatusCode, tc.want)
		}
	}
	check(t, b, 20)
}

func firstLine(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+2)
	return strings.Join(lines[:min(len(lines), n+1)], " | ")
}

// TestTopicChurnBounded: 2,000 × 60 KB publishes to new topics, with the publish rate lifted
// (as a crowd of addresses would get round it). The memory broker keeps non-durable history
// within --history-max-bytes by dropping the least recently used topics' history, so RSS stays
// bounded; before, every one was held for --history-ttl (120 MB here, 3.6 GB over ten minutes
// at the default rate from one address).
func TestTopicChurnBounded(t *testing.T) {
	p, b := startWithBystander(t, "news/churn", "--http-pub-rate", "-1", "--history-max-bytes", "16777216")
	base := p.RSS()
	hc := httpFrom(attacker)
	body := padded(60<<10, `"n":1`)
	for i := 0; i < 2000; i++ {
		if st, _, ans := post(t, hc, fmt.Sprintf("%s/api/publish/flood/t%d", p.URL(), i), body); st != http.StatusOK {
			t.Fatalf("publish %d: %d %s", i, st, ans)
		}
	}
	growth(t, p, base, 64*mib, "after 2,000 × 60 KB to new topics")
	// The first topic kept its position and lost its history; a reader is told so.
	st, _, ans := get(t, hc, p.URL()+"/api/poll/flood/t0?since=0")
	var poll struct {
		Offset       uint64
		Recovered    bool
		Reason       string
		Publications []json.RawMessage
	}
	if st != http.StatusOK || json.Unmarshal(ans, &poll) != nil {
		t.Fatalf("poll flood/t0: %d %s", st, ans)
	}
	if poll.Offset != 1 || poll.Recovered || len(poll.Publications) != 0 || !strings.Contains(poll.Reason, "no longer retained") {
		t.Fatalf("poll of a trimmed topic: %s; want offset 1, not recovered, told what is gone", ans)
	}
	check(t, b, 20)
}

// TestLookupsOfMissingTopicsKeepNothing: 20,000 polls and history reads of topics nobody
// published to. Each answered, and kept, a topic of its own before (41 MiB for an hour).
func TestLookupsOfMissingTopicsKeepNothing(t *testing.T) {
	// 20,000 serial reads from one address: on a fast machine that is over the address's read
	// rate, which this test does not measure (TestHTTPReadsRateLimited does).
	p, b := startWithBystander(t, "news/lookups", "--read-rate-per-ip", "-1")
	hc := httpFrom(attacker)
	// Warm up the allocator so the base is not the empty heap.
	for i := 0; i < 500; i++ {
		get(t, hc, fmt.Sprintf("%s/api/poll/warm/t%d?since=0", p.URL(), i))
	}
	base := p.RSS()
	for i := 0; i < 20000; i++ {
		path := fmt.Sprintf("/api/poll/probe/t%d?since=0", i)
		if i%2 == 1 {
			path = fmt.Sprintf("/api/topics/probe/t%d/history", i)
		}
		if st, _, ans := get(t, hc, p.URL()+path); st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, ans)
		}
	}
	growth(t, p, base, 8*mib, "after 20,000 lookups of missing topics")
	check(t, b, 20)
}
