// Command natsprobe measures what one JetStream stream costs per publication, for
// BENCHMARKS.md: two connections publish to -subjects subjects of a file-storage stream at a
// fixed total rate, each publish conditional on the subject's last sequence as rtlab's NATS
// broker does it, and two ordered consumers read the whole stream, as two rtlab nodes would.
// It reports the latency of the publish acknowledgements and from publish to each consumer,
// over the second half of the run (by then a subject holds -per messages and every publish
// also removes one).
//
//	natsprobe -url nats://127.0.0.1:4222 -rate 1667 -subjects 500 -per 100
//
// With -republish the stream republishes every stored message to core NATS subjects, and two
// plain subscriptions read those instead of the ordered consumers: the live path an rtlab node
// could take instead of its consumer.
//
// It is a measuring tool, not part of rtlab. It deletes and recreates the stream -stream
// (default natsprobe) and leaves it behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("url", "nats://127.0.0.1:4222", "NATS URL (JetStream enabled)")
	stream := flag.String("stream", "natsprobe", "stream to recreate and use")
	rate := flag.Int("rate", 1667, "publications per second, over both publishers")
	subjects := flag.Int("subjects", 500, "subjects (rtlab topics) the publications are spread over")
	per := flag.Int64("per", 100, "MaxMsgsPerSubject of the stream (-1: no limit)")
	duration := flag.Duration("duration", 45*time.Second, "how long to publish")
	republish := flag.Bool("republish", false, "read the stream's republished copies over core NATS instead of ordered consumers")
	flag.Parse()
	if err := run(*url, *stream, *rate, *subjects, *per, *duration, *republish); err != nil {
		fmt.Fprintln(os.Stderr, "natsprobe:", err)
		os.Exit(1)
	}
}

func run(url, stream string, rate, subjects int, per int64, duration time.Duration, republish bool) error {
	if rate <= 0 || subjects <= 0 {
		return fmt.Errorf("want -rate > 0 and -subjects > 0")
	}
	ctx := context.Background()
	js, err := connect(url)
	if err != nil {
		return err
	}
	live := "live-" + stream
	if err := createStream(ctx, js, stream, live, per, republish); err != nil {
		return err
	}
	m := &measures{half: time.Now().Add(duration / 2)}
	for range 2 {
		stop, err := startReader(ctx, url, stream, live, republish, m)
		if err != nil {
			return err
		}
		defer stop()
	}
	pubs := make([]jetstream.JetStream, 2)
	for i := range pubs {
		if pubs[i], err = connect(url); err != nil {
			return err
		}
	}
	publishAll(ctx, pubs, stream, rate, subjects, duration, m)
	time.Sleep(500 * time.Millisecond) // the consumers' last copies
	m.mu.Lock()
	defer m.mu.Unlock()
	how := "ordered consumers"
	if republish {
		how = "republished"
	}
	fmt.Printf("rate %d/s over %d subjects, %d per subject, %s: ack %s; consumed %s\n", rate, subjects, per, how, quantiles(m.acks), quantiles(m.consumed))
	return nil
}

// measures holds the latencies of the second half of a run, from half on.
type measures struct {
	half     time.Time
	mu       sync.Mutex
	acks     []time.Duration // publish to acknowledgement; guarded by mu
	consumed []time.Duration // publish to each consumer; guarded by mu
}

// took records the latency of a copy read by a consumer; data is its publish time.
func (m *measures) took(data []byte) {
	ns, _ := strconv.ParseInt(string(data), 10, 64)
	if t := time.Unix(0, ns); t.After(m.half) {
		d := time.Since(t)
		m.mu.Lock()
		m.consumed = append(m.consumed, d)
		m.mu.Unlock()
	}
}

// acked records the latency of a publish acknowledgement for a publish made at t0.
func (m *measures) acked(t0 time.Time) {
	if t0.After(m.half) {
		m.mu.Lock()
		m.acks = append(m.acks, time.Since(t0))
		m.mu.Unlock()
	}
}

// createStream deletes and recreates the stream, republishing to live with republish.
func createStream(ctx context.Context, js jetstream.JetStream, stream, live string, per int64, republish bool) error {
	_ = js.DeleteStream(ctx, stream)
	cfg := jetstream.StreamConfig{
		Name: stream, Subjects: []string{stream + ".>"}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: per, MaxAge: 10 * time.Minute, AllowDirect: true,
	}
	if republish {
		cfg.RePublish = &jetstream.RePublish{Source: stream + ".>", Destination: live + ".>"}
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("create stream %s: %w", stream, err)
	}
	return nil
}

// startReader connects one reader of the whole stream: an ordered consumer, or with republish
// a plain subscription to the republished copies. stop ends its reading.
func startReader(ctx context.Context, url, stream, live string, republish bool, m *measures) (stop func(), err error) {
	cjs, err := connect(url)
	if err != nil {
		return nil, err
	}
	if republish {
		sub, err := cjs.Conn().Subscribe(live+".>", func(msg *natsgo.Msg) { m.took(msg.Data) })
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", live, err)
		}
		return func() { _ = sub.Unsubscribe() }, nil
	}
	c, err := cjs.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer: %w", err)
	}
	cc, err := c.Consume(func(msg jetstream.Msg) { m.took(msg.Data()) })
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	return cc.Stop, nil
}

// publishAll publishes at rate for duration, spread over subjects and alternating between
// pubs, each publish conditional on its subject's last sequence; it returns once all are
// answered.
func publishAll(ctx context.Context, pubs []jetstream.JetStream, stream string, rate, subjects int, duration time.Duration, m *measures) {
	// One lock and last sequence per subject: a node serializes its publishes to one topic.
	type subj struct {
		sync.Mutex
		last uint64
	}
	subs := make([]subj, subjects)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	tick := time.Second / time.Duration(rate)
	start := time.Now()
	for n := 0; ; n++ {
		next := start.Add(time.Duration(n) * tick)
		if next.Sub(start) >= duration {
			break
		}
		time.Sleep(time.Until(next))
		s, p := &subs[n%subjects], pubs[n%len(pubs)]
		name := stream + "." + strconv.Itoa(n%subjects)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.Lock()
			defer s.Unlock()
			t0 := time.Now()
			ack, err := p.PublishMsg(ctx, &natsgo.Msg{Subject: name, Data: strconv.AppendInt(nil, t0.UnixNano(), 10)},
				jetstream.WithExpectLastSequencePerSubject(s.last))
			if err != nil {
				fmt.Fprintln(os.Stderr, "natsprobe: publish:", err)
				return
			}
			s.last = ack.Sequence
			m.acked(t0)
		}()
	}
	wg.Wait()
}

func connect(url string) (jetstream.JetStream, error) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return jetstream.New(nc)
}

// quantiles is "n=… p50=… p99=… p99.9=… max=…" of ds, which it sorts.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[int(p*float64(len(ds)-1))].Round(time.Microsecond) }
	return fmt.Sprintf("n=%d p50=%v p99=%v p99.9=%v max=%v", len(ds), q(0.5), q(0.99), q(0.999), ds[len(ds)-1].Round(time.Microsecond))
}
