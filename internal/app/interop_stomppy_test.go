package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/stomp"
)

// TestInteropStompPy drives stomp.py with its default transport, plain TCP, against the STOMP
// listener: CONNECT with a token, SUBSCRIBE with since, SEND, MESSAGE, heart-beats. Then
// frames from rtlab's encoder, with random headers full of the octets STOMP escapes, are parsed
// by stomp.py's parser and must come back as they were.
func TestInteropStompPy(t *testing.T) {
	py := pyjwtPython(t)
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = s.app.tr.ServeSTOMP(ln) }()
	tok := tokenFor(t, "pyuser", time.Hour)
	for n := 1; n <= 2; n++ {
		if code, body := do(t, s, "POST", "/api/publish/py/room", tok, fmt.Sprintf(`{"n":%d}`, n)); code != 200 {
			t.Fatalf("publish: %d %s", code, body)
		}
	}

	seed := rand.Uint64()
	t.Logf("frames from seed %d", seed)
	frames := randomFrames(rand.New(rand.NewPCG(seed, 31)), 300)
	var file bytes.Buffer
	for _, f := range frames {
		b := stomp.AppendFrame(nil, &f)
		fmt.Fprintf(&file, "%d\n", len(b))
		file.Write(b)
	}
	path := filepath.Join(t.TempDir(), "frames")
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "stomppy.py", host, port, tok, path)
	cmd.Dir = interopDir(t)
	out, err := cmd.CombinedOutput()
	head, parsed, _ := strings.Cut(string(out), "FRAMES\n")
	t.Logf("stomp.py:\n%s", head)
	if err != nil || !strings.HasSuffix(parsed, "PASS\n") {
		t.Fatalf("stomp.py failed: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(strings.TrimSuffix(parsed, "PASS\n")))
	sc.Buffer(nil, 1<<20)
	i := 0
	for ; sc.Scan(); i++ {
		var got struct {
			Command string
			Headers map[string]string
			Body    string
		}
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("frame %d: %v: %s", i, err, sc.Bytes())
		}
		want := frames[i]
		wantHeaders := map[string]string{}
		for _, h := range want.Headers {
			if _, ok := wantHeaders[h.Key]; !ok {
				wantHeaders[h.Key] = h.Value
			}
		}
		if len(want.Body) > 0 {
			wantHeaders[stomp.HdrContentLength] = fmt.Sprint(len(want.Body))
		}
		if got.Command != want.Command || got.Body != string(want.Body) || !equalMaps(got.Headers, wantHeaders) {
			t.Errorf("frame %d came back as %+v, sent %+v (%s)", i, got, want, stomp.AppendFrame(nil, &want))
		}
	}
	if i != len(frames) {
		t.Fatalf("stomp.py parsed %d frames of %d", i, len(frames))
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// randomFrames returns n frames a server or client sends (CONNECT and CONNECTED, whose headers
// are not escaped, aside) with random header names and values drawn mostly from the octets
// that need escapes, and random UTF-8 bodies.
func randomFrames(r *rand.Rand, n int) []stomp.Frame {
	cmds := []string{stomp.CmdMessage, stomp.CmdSend, stomp.CmdReceipt, stomp.CmdError, stomp.CmdSubscribe, stomp.CmdAck}
	alphabet := []rune{':', '\\', '\n', '\r', 'c', 'n', 'r', ' ', 'a', 'Z', '0', '-', '/', 'é', '日', '\t'}
	str := func(min, max int) string {
		var b strings.Builder
		for range min + r.IntN(max-min+1) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	frames := make([]stomp.Frame, n)
	for i := range frames {
		f := stomp.Frame{Command: cmds[r.IntN(len(cmds))]}
		for range r.IntN(6) {
			k := str(1, 8)
			if k == stomp.HdrContentLength {
				continue
			}
			f.Headers = append(f.Headers, stomp.Header{Key: k, Value: str(1, 12)})
		}
		if r.IntN(3) > 0 {
			f.Body = []byte(str(0, 40))
		}
		if !utf8.Valid(f.Body) {
			f.Body = nil
		}
		frames[i] = f
	}
	return frames
}

// TestInteropSockJS drives sockjs-client with @stomp/stompjs, as a Spring browser client
// connects, over each SockJS transport it offers in Node: websocket, xhr-streaming,
// xhr-polling and eventsource, with a token, resume and heart-beats.
func TestInteropSockJS(t *testing.T) {
	dir := interopDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "sockjs-client")); err != nil {
		t.Fatalf("sockjs-client not installed: run npm ci in %s", dir)
	}
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.SockJSPath = "/ws" })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sockjs.mjs", s.URL+"/ws", tokenFor(t, "sockjsuser", time.Hour))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("sockjs-client:\n%s", out)
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("sockjs-client failed: %v", err)
	}
}
