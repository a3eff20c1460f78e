// Command loadprobe measures two server properties from a second process, for BENCHMARKS.md:
//
//	loadprobe fanout -url ws://127.0.0.1:8080 -subs 2000 -rate 600 -duration 10s
//	    one topic, N WebSocket subscribers, one publisher at a fixed rate; reports deliveries/s
//	loadprobe idle -url http://127.0.0.1:8080 -pid PID -transport ws -conns 10000
//	    opens N idle subscribed connections and reports the server's RSS per connection
//
// It is a measuring tool, not part of rtlab: `rtlab bench` is the load lab for users.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/rtlab/rtlab/internal/procstat"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadprobe fanout|idle [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fanout":
		err = fanout(os.Args[2:])
	case "idle":
		err = idle(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadprobe:", err)
		os.Exit(1)
	}
}

// dialer spreads connections over 127.0.0.x source addresses so 10k+ sockets fit the
// ephemeral port range.
func dialer(i int) *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%8))}}
}

func dialWS(ctx context.Context, i int, url string, protocols ...string) (net.Conn, *bufio.Reader, error) {
	d := ws.Dialer{Protocols: protocols, NetDial: dialer(i).DialContext, Timeout: 10 * time.Second}
	conn, br, _, err := d.Dial(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	if br == nil {
		br = bufio.NewReaderSize(conn, 4096)
	}
	return conn, br, nil
}

func fanout(args []string) error {
	fs := flag.NewFlagSet("fanout", flag.ExitOnError)
	url := fs.String("url", "ws://127.0.0.1:8080", "server base URL")
	subs := fs.Int("subs", 2000, "subscribers on the topic")
	rate := fs.Int("rate", 600, "publications per second")
	dur := fs.Duration("duration", 10*time.Second, "measurement time")
	size := fs.Int("size", 64, "bytes of padding in each publication's data")
	_ = fs.Parse(args)
	ctx := context.Background()
	var delivered, closed atomic.Int64
	ready := make(chan struct{}, *subs)
	for i := 0; i < *subs; i++ {
		conn, br, err := dialWS(ctx, i, *url+"/api/ws")
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		if err := wsutil.WriteClientText(conn, []byte(`{"op":"subscribe","topic":"fanout"}`)); err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			r := bufio.NewReaderSize(io.MultiReader(br, conn), 32<<10)
			msgs := 0
			for {
				h, err := ws.ReadHeader(r)
				if err != nil {
					closed.Add(1)
					return
				}
				if _, err := r.Discard(int(h.Length)); err != nil {
					closed.Add(1)
					return
				}
				if h.OpCode == ws.OpClose {
					closed.Add(1)
					return
				}
				msgs++
				if msgs == 2 { // connected + subscribed
					ready <- struct{}{}
				}
				if msgs > 2 {
					delivered.Add(1)
				}
			}
		}()
	}
	for i := 0; i < *subs; i++ {
		<-ready
	}
	pub, _, err := dialWS(ctx, 0, *url+"/api/ws")
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, pub) }() // acks
	pad := strings.Repeat("x", *size)
	stop := time.Now().Add(*dur + time.Second)
	go func() {
		interval := time.Second / time.Duration(*rate)
		next := time.Now()
		var frames []byte
		n := 0
		for time.Now().Before(stop) {
			// Send what is due in one write: the publisher must not be the bottleneck.
			frames = frames[:0]
			for now := time.Now(); !next.After(now); next = next.Add(interval) {
				n++
				msg := fmt.Sprintf(`{"op":"publish","topic":"fanout","data":{"n":%d,"pad":"%s"}}`, n, pad)
				var b strings.Builder
				_ = wsutil.WriteClientText(writerTo{&b}, []byte(msg))
				frames = append(frames, b.String()...)
			}
			if len(frames) > 0 {
				if _, err := pub.Write(frames); err != nil {
					fmt.Fprintln(os.Stderr, "publisher:", err)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(time.Second) // warm up
	var perSec []float64
	last := delivered.Load()
	for i := 0; i < int(dur.Seconds()); i++ {
		time.Sleep(time.Second)
		now := delivered.Load()
		perSec = append(perSec, float64(now-last))
		last = now
	}
	slices.Sort(perSec)
	med := perSec[len(perSec)/2]
	fmt.Printf("fanout: subscribers=%d rate=%d/s expected=%d deliveries/s median=%.0f deliveries/s min=%.0f max=%.0f disconnected=%d\n",
		*subs, *rate, *rate**subs, med, perSec[0], perSec[len(perSec)-1], closed.Load())
	return nil
}

type writerTo struct{ b *strings.Builder }

func (w writerTo) Write(p []byte) (int, error) { return w.b.Write(p) }

func rss(pid int) (int64, error) {
	n, ok := procstat.StatusBytes(strconv.Itoa(pid), "VmRSS:")
	if !ok {
		return 0, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return int64(n), nil
}

func idle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "server base URL")
	pid := fs.Int("pid", 0, "server process id (for RSS)")
	transport := fs.String("transport", "ws", "ws, stomp or sse")
	conns := fs.Int("conns", 10000, "connections")
	topics := fs.Int("topics", 1000, "distinct topics the connections subscribe to")
	settle := fs.Duration("settle", 5*time.Second, "wait before measuring")
	_ = fs.Parse(args)
	if *pid == 0 {
		return fmt.Errorf("-pid is required")
	}
	before, err := rss(*pid)
	if err != nil {
		return err
	}
	wsURL := "ws" + strings.TrimPrefix(*url, "http")
	ctx := context.Background()
	var held []io.Closer
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Int64
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			topic := fmt.Sprintf("idle/%d", i%*topics)
			c, err := openIdle(ctx, i, *transport, *url, wsURL, topic)
			if err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	time.Sleep(*settle)
	after, err := rss(*pid)
	if err != nil {
		return err
	}
	n := int64(len(held))
	fmt.Printf("idle: transport=%s conns=%d failed=%d rss_before=%.1fMiB rss_after=%.1fMiB per_conn=%.1fKiB\n",
		*transport, n, failed.Load(), float64(before)/(1<<20), float64(after)/(1<<20), float64(after-before)/float64(n)/1024)
	for _, c := range held {
		c.Close()
	}
	return nil
}

func openIdle(ctx context.Context, i int, transport, httpURL, wsURL, topic string) (io.Closer, error) {
	switch transport {
	case "ws":
		conn, _, err := dialWS(ctx, i, wsURL+"/api/ws")
		if err != nil {
			return nil, err
		}
		return conn, wsutil.WriteClientText(conn, []byte(`{"op":"subscribe","topic":"`+topic+`"}`))
	case "stomp":
		conn, _, err := dialWS(ctx, i, wsURL+"/api/stomp", "v12.stomp")
		if err != nil {
			return nil, err
		}
		frame := "CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\x00SUBSCRIBE\nid:0\ndestination:/topic/" + topic + "\n\n\x00"
		return conn, wsutil.WriteClientText(conn, []byte(frame))
	case "sse":
		tr := &http.Transport{DialContext: dialer(i).DialContext, DisableKeepAlives: true}
		req, _ := http.NewRequestWithContext(ctx, "GET", httpURL+"/api/sse?topic="+topic, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp.Body, nil
	}
	return nil, fmt.Errorf("unknown transport %q", transport)
}
