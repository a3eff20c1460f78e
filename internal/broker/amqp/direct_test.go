package amqp

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// startBroker starts a node named ns on srv.
func startBroker(t *testing.T, srv *brokertest.Server, ns, direct string) (*Broker, *brokertest.Recorder) {
	t.Helper()
	b, err := New(context.Background(), srv.URL, Config{Name: ns, Direct: direct, MaxBytes: 64 << 20, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	rec := brokertest.NewRecorder()
	if err := b.Run(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, rec
}

func publish(t *testing.T, b *Broker, topic string, i int) *hub.Publication {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := b.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	if err != nil {
		t.Errorf("publish %d: %v", i, err)
	}
	return p
}

// announced waits until b has read an announcement other than not's, and returns it.
func announced(t *testing.T, b *Broker, not string) announcement {
	t.Helper()
	var a announcement
	eventually.Nil(t, 10*time.Second, func() error {
		if p := b.seqAt.Load(); p != nil && p.token != not {
			a = *p
			return nil
		}
		return fmt.Errorf("no sequencer announced")
	})
	return a
}

// TestDirectRefusesStrangers: the sequencer's listener answers a wrong hello with "no", closes
// a link that sends a message of a wrong size, skips one that does not parse, and goes on
// taking the other node's requests.
func TestDirectRefusesStrangers(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	ns := brokertest.Namespace()
	first, _ := startBroker(t, srv, ns, "127.0.0.1:0")
	second, rec := startBroker(t, srv, ns, "127.0.0.1:0")
	if err := second.Subscribe(context.Background(), "chat/direct"); err != nil {
		t.Fatal(err)
	}
	publish(t, second, "chat/direct", 0) // the first node, the first consumer, becomes the sequencer
	a := announced(t, second, "")

	dial := func(hello string) (net.Conn, string) {
		t.Helper()
		c, err := net.DialTimeout("tcp", a.addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, hello); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		return c, line
	}
	for _, hello := range []string{"rtlab-sequencer " + ns + " wrongtoken\n", "rtlab-sequencer other " + a.token + "\n", "GET / HTTP/1.1\r\n"} {
		c, answer := dial(hello)
		c.Close()
		if answer != "no\n" {
			t.Errorf("hello %q answered %q, want no", hello, answer)
		}
	}
	for _, msg := range [][]byte{
		{0, 0, 0, 0},             // empty
		{0xff, 0xff, 0xff, 0xff}, // too long
	} {
		c, answer := dial(first.hello(a.token))
		if answer != "ok\n" {
			t.Fatalf("the right hello answered %q", answer)
		}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("link that sent size %x is still open", msg)
		}
		c.Close()
	}
	c, _ := dial(first.hello(a.token))
	garbage := []byte("p not-an-entry")
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(garbage))), garbage...)); err != nil {
		t.Fatal(err)
	}
	c.Close()

	for i := 1; i <= 5; i++ {
		if p := publish(t, second, "chat/direct", i); p != nil && p.Offset != uint64(i+1) {
			t.Errorf("publish %d got offset %d", i, p.Offset)
		}
	}
	rec.WaitCount(t, "chat/direct", 6, 10*time.Second)
	if got := len(rec.Get("chat/direct")); got != 6 {
		t.Errorf("delivered %d, want 6", got)
	}
}

// TestDirectLinkBreaks: requests that went on a link that then broke are sent to the sequencer
// queue again, and each is published once, whether the sequencer had taken it or not. The
// "sequencer" at the other end of the link is this test: it passes the first wave of requests
// on to the queue, swallows the second, and closes the link.
func TestDirectLinkBreaks(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	ns := brokertest.Namespace()
	const topic = "chat/breaks"
	startBroker(t, srv, ns, "") // the sequencer, which does not listen
	node, rec := startBroker(t, srv, ns, "127.0.0.1:0")
	if err := node.Subscribe(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	publish(t, node, topic, 0)

	conn, err := amqp091.Dial(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const token = "testtokentesttokentestto"
	if err := ch.PublishWithContext(context.Background(), ns+".topics", controlKey, false, false,
		amqp091.Publishing{Body: appendSequencer(token, l.Addr().String())}); err != nil {
		t.Fatal(err)
	}
	announced(t, node, "")

	// The fake sequencer: it reads request messages and reports how many requests each held.
	frames := make(chan []byte)
	linked := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		r := bufio.NewReader(c)
		if hello, _ := r.ReadString('\n'); hello != node.hello(token) {
			t.Errorf("hello %q", hello)
		}
		_, _ = io.WriteString(c, "ok\n")
		linked <- c
		for {
			var head [4]byte
			if _, err := io.ReadFull(r, head[:]); err != nil {
				close(frames)
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(head[:]))
			if _, err := io.ReadFull(r, body); err != nil {
				close(frames)
				return
			}
			frames <- body
		}
	}()
	requests := func(n int) (got [][]byte) {
		t.Helper()
		for count := 0; count < n; {
			select {
			case f := <-frames:
				es, err := parseMessage(f, nil)
				if err != nil {
					t.Fatalf("link carried a malformed message: %v", err)
				}
				count += len(es)
				got = append(got, f)
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of %d requests came on the link", count, n)
			}
		}
		return got
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		acks []*hub.Publication
	)
	wave := func(from, n int) {
		for i := from; i < from+n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if p := publish(t, node, topic, i); p != nil {
					mu.Lock()
					acks = append(acks, p)
					mu.Unlock()
				}
			}()
		}
	}
	// The node dials the sequencer as soon as it is announced.
	var link net.Conn
	select {
	case link = <-linked:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not connect to the announced sequencer")
	}
	time.Sleep(100 * time.Millisecond) // for the node to take the link it just opened

	// The first wave is lost with the link. The second is passed on to the queue, as a
	// sequencer would take it, just before the link breaks: the node sends it again before its
	// publications come back, and the sequencer must take only one copy of each, whichever
	// comes first.
	wave(1, 5)
	requests(5)
	wave(6, 5)
	for _, f := range requests(5) {
		if err := ch.PublishWithContext(context.Background(), "", ns+".sequencer", false, false, amqp091.Publishing{Body: f}); err != nil {
			t.Fatal(err)
		}
	}
	link.Close()
	wg.Wait()

	slices.SortFunc(acks, func(a, b *hub.Publication) int { return int(a.Offset) - int(b.Offset) })
	if len(acks) != 10 {
		t.Fatalf("%d of 10 publishes acknowledged", len(acks))
	}
	for i, p := range acks {
		if p.Offset != uint64(i+2) {
			t.Fatalf("acknowledged offsets are not 2..11: #%d is %d", i, p.Offset)
		}
	}
	rec.WaitCount(t, topic, 11, 10*time.Second)
	time.Sleep(200 * time.Millisecond) // a duplicate would arrive about now
	if got := len(rec.Get(topic)); got != 11 {
		t.Errorf("delivered %d publications, want 11 (each once)", got)
	}
	if err := rec.CheckOrder(topic); err != nil {
		t.Error(err)
	}
	var m dto.Metric
	if err := node.m.retried.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n < 5 {
		t.Errorf("%v requests sent to the queue again, want at least the 5 the link lost", n)
	} else {
		t.Logf("%v requests sent to the queue again", n)
	}
}
