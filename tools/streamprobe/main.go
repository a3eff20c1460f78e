// Command streamprobe measures what one RabbitMQ stream costs per message, for BENCHMARKS.md:
// two connections publish to a stream queue at a fixed total rate of publications, packed
// -batch to a message, and two consumers read it, as two rtlab nodes would. It reports the
// latency from publish to each consumer and, given -pid, the RabbitMQ VM's CPU. With -classic
// it measures the same through a fanout exchange to two classic queues, one per consumer; with
// -replyto, by publishing each message to both consumers' direct reply-to addresses, which
// skips RabbitMQ's queue processes. -log adds the stream to either, as rtlab's log.
//
//	streamprobe -url amqp://guest:guest@127.0.0.1:5672/ -rate 1667 -batch 1 -pid $(pgrep beam.smp)
//
// It is a measuring tool, not part of rtlab. It declares the stream queue -queue (default
// streamprobe.log) and leaves it behind; -classic declares an auto-deleted exchange.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/procstat"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL")
	queue := flag.String("queue", "streamprobe.log", "stream queue to declare and use")
	rate := flag.Int("rate", 1667, "publications per second, over both publishers")
	batch := flag.Int("batch", 1, "publications per message")
	classic := flag.Bool("classic", false, "publish to a fanout exchange with a classic queue per consumer instead of a stream")
	replyTo := flag.Bool("replyto", false, "publish each message to every consumer's direct reply-to address instead of a queue (and, with -log, once to the stream)")
	withLog := flag.Bool("log", false, "with -classic, also bind the stream to the fanout exchange; with -replyto, also publish every message to the stream (as rtlab's log)")
	size := flag.Int("size", 120, "bytes per publication")
	duration := flag.Duration("duration", 20*time.Second, "how long to publish")
	pid := flag.Int("pid", 0, "RabbitMQ's beam.smp process, to report its CPU (0: not reported)")
	flag.Parse()
	m := mode{classic: *classic, replyTo: *replyTo, log: *withLog}
	if err := run(*url, *queue, *rate, *batch, *size, *duration, *pid, m); err != nil {
		fmt.Fprintln(os.Stderr, "streamprobe:", err)
		os.Exit(1)
	}
}

// mode is how publications travel: to a stream read by both consumers (the zero mode), a
// fanout exchange with a classic queue per consumer, or each consumer's direct reply-to
// address; with log, the last two also append every message to the stream.
type mode struct{ classic, replyTo, log bool }

// probe is one run's settings, what it declared, and what it measured.
type probe struct {
	url, queue        string
	rate, batch, size int
	duration          time.Duration
	md                mode
	stream            bool // publications go to the stream, read by both consumers

	// Publications go to exchange with key: the stream through the default exchange, or the
	// fanout exchange; with -replyto, to each consumer's address (targets) instead.
	exchange, key string
	targets       []string

	conns []*amqp.Connection // the consumers' and publishers', closed at the end

	mu  sync.Mutex
	lat []time.Duration // one per publication per consumer; guarded by mu
}

func run(url, queue string, rate, batch, size int, duration time.Duration, pid int, md mode) error {
	if md.classic && md.replyTo {
		return fmt.Errorf("-classic or -replyto, not both")
	}
	if rate <= 0 || batch <= 0 || size < 20 {
		return fmt.Errorf("want -rate > 0, -batch > 0, -size >= 20")
	}
	p := &probe{url: url, queue: queue, rate: rate, batch: batch, size: size, duration: duration, md: md,
		stream: !md.classic && !md.replyTo}
	conn, ch, err := dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := p.declare(ch); err != nil {
		return err
	}
	var (
		hello  string // the queue where each consumer sends its reply-to address
		hellos <-chan amqp.Delivery
	)
	if md.replyTo {
		if hello, hellos, err = announcements(ch); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer p.closeConns()
	for range 2 {
		if err := p.startConsumer(ctx, hello); err != nil {
			return err
		}
	}
	for len(p.targets) < 2 && hellos != nil {
		select {
		case m := <-hellos:
			p.targets = append(p.targets, m.ReplyTo)
		case <-time.After(5 * time.Second):
			return fmt.Errorf("consumers' reply-to addresses: got %d of 2", len(p.targets))
		}
	}
	time.Sleep(500 * time.Millisecond) // consumers attached at "next" before anything is sent

	cpu0, _ := cpuTime(pid)
	start := time.Now()
	err = p.publishAll(ctx)
	elapsed := time.Since(start)
	cpu1, cpuErr := cpuTime(pid)
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // the last deliveries
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lat) == 0 {
		return fmt.Errorf("nothing delivered")
	}
	lat := p.lat
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	fmt.Printf("%d publications/s, %d per message: %d deliveries, p50 %.2f ms, p99 %.2f ms",
		rate, batch, len(lat), q(0.5), q(0.99))
	if pid > 0 && cpuErr == nil {
		fmt.Printf(", RabbitMQ CPU %.0f %%", 100*(cpu1-cpu0).Seconds()/elapsed.Seconds())
	}
	fmt.Println()
	return nil
}

// declare declares the stream when anything goes to it, and with -classic the fanout exchange,
// and sets where publications go.
func (p *probe) declare(ch *amqp.Channel) error {
	if p.stream || p.md.log {
		if _, err := ch.QueueDeclare(p.queue, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
			return fmt.Errorf("declare %s: %w", p.queue, err)
		}
	}
	p.exchange, p.key = "", p.queue
	if !p.md.classic {
		return nil
	}
	p.exchange, p.key = p.queue+".fanout", ""
	if err := ch.ExchangeDeclare(p.exchange, "fanout", false, true, false, false, nil); err != nil {
		return fmt.Errorf("declare %s: %w", p.exchange, err)
	}
	if p.md.log {
		if err := ch.QueueBind(p.queue, "", p.exchange, false, nil); err != nil {
			return fmt.Errorf("bind %s: %w", p.queue, err)
		}
	}
	return nil
}

// announcements declares and consumes the queue where -replyto consumers send their addresses.
// A consumer of amq.rabbitmq.reply-to learns its address only from a message it publishes:
// RabbitMQ fills in the reply_to property. Each one sends one here.
func announcements(ch *amqp.Channel) (string, <-chan amqp.Delivery, error) {
	names, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return "", nil, fmt.Errorf("declare a queue: %w", err)
	}
	hellos, err := ch.Consume(names.Name, "", true, true, false, false, nil)
	if err != nil {
		return "", nil, fmt.Errorf("consume %s: %w", names.Name, err)
	}
	return names.Name, hellos, nil
}

// startConsumer connects one consumer and records the latency of what it receives; with
// -replyto it sends its address to the queue hello.
func (p *probe) startConsumer(ctx context.Context, hello string) error {
	c, cch, err := dial(p.url)
	if err != nil {
		return err
	}
	p.conns = append(p.conns, c)
	if err := cch.Qos(1000, 0, false); err != nil {
		return err
	}
	var msgs <-chan amqp.Delivery
	if p.md.replyTo {
		if msgs, err = cch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil); err != nil {
			return fmt.Errorf("consume amq.rabbitmq.reply-to: %w", err)
		}
		if err := cch.PublishWithContext(ctx, "", hello, false, false, amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to"}); err != nil {
			return fmt.Errorf("announce: %w", err)
		}
	} else if msgs, err = consume(cch, p.queue, p.exchange, p.md.classic); err != nil {
		return err
	}
	go p.record(msgs)
	return nil
}

// record takes the latency of each delivery until msgs closes.
func (p *probe) record(msgs <-chan amqp.Delivery) {
	n := 0
	for m := range msgs {
		if n++; p.stream && n%256 == 0 { // a stream consumer acks only to grant credit
			_ = m.Ack(true)
		}
		if len(m.Body) < 20 {
			continue // not one of ours
		}
		sent, err := strconv.ParseInt(strings.TrimRight(string(m.Body[:20]), " "), 10, 64)
		if err != nil {
			continue
		}
		d := time.Since(time.Unix(0, sent))
		p.mu.Lock()
		for range p.batch {
			p.lat = append(p.lat, d)
		}
		p.mu.Unlock()
	}
}

// publishAll publishes from two connections at the set rate for the set duration.
func (p *probe) publishAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for range 2 {
		c, pch, err := dial(p.url)
		if err != nil {
			return err
		}
		p.conns = append(p.conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			every := time.Duration(int64(time.Second) * int64(p.batch) * 2 / int64(p.rate))
			tick := time.NewTicker(every)
			defer tick.Stop()
			body := make([]byte, p.size*p.batch)
			for end := time.Now().Add(p.duration); time.Now().Before(end); {
				<-tick.C
				copy(body, fmt.Sprintf("%-20d", time.Now().UnixNano()))
				if err := publish(ctx, pch, p.md, p.exchange, p.key, p.queue, p.targets, body); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// closeConns closes the consumers' and publishers' connections, the last opened first.
func (p *probe) closeConns() {
	for i := len(p.conns) - 1; i >= 0; i-- {
		_ = p.conns[i].Close()
	}
}

// publish sends one message the way md says: to every target and, with md.log, the stream
// queue; otherwise to exchange with key.
func publish(ctx context.Context, ch *amqp.Channel, md mode, exchange, key, queue string, targets []string, body []byte) error {
	if !md.replyTo {
		return ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{Body: body})
	}
	if md.log {
		if err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{Body: body}); err != nil {
			return err
		}
	}
	for _, t := range targets {
		if err := ch.PublishWithContext(ctx, "", t, false, false, amqp.Publishing{Body: body}); err != nil {
			return err
		}
	}
	return nil
}

// consume starts a consumer: on the stream from its next message, or on a new classic queue
// bound to exchange, without acks.
func consume(ch *amqp.Channel, queue, exchange string, classic bool) (<-chan amqp.Delivery, error) {
	if !classic {
		msgs, err := ch.Consume(queue, "", false, false, false, false, amqp.Table{"x-stream-offset": "next"})
		if err != nil {
			return nil, fmt.Errorf("consume %s: %w", queue, err)
		}
		return msgs, nil
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return nil, fmt.Errorf("declare a queue: %w", err)
	}
	if err := ch.QueueBind(q.Name, "", exchange, false, nil); err != nil {
		return nil, fmt.Errorf("bind %s: %w", q.Name, err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", q.Name, err)
	}
	return msgs, nil
}

// dial opens a connection to url and a channel on it; the caller closes the connection.
func dial(url string) (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("open a channel: %w", err)
	}
	return conn, ch, nil
}

// cpuTime is the user+system CPU of process pid so far.
func cpuTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no pid")
	}
	cpu, _, err := procstat.Read(strconv.Itoa(pid))
	return cpu, err
}
