package bench

import (
	"errors"
	"math"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rtlab/rtlab/internal/results"
)

// Histogram bounds: values are microseconds from 1 µs to one hour, 3 significant figures.
const (
	histMin     = 1
	histMax     = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSigFigs) }

// recordDur records d in microseconds, clamped into the histogram's range.
func recordDur(h *hdrhistogram.Histogram, d time.Duration) {
	us := int64(d / time.Microsecond)
	_ = h.RecordValue(min(max(us, histMin), histMax))
}

// Histograms a shard keeps.
const (
	histDelivery = iota // publisher's intended send time → receiver
	histPublish         // intended send time → ack or HTTP response
	histConnect         // dial → transport ready
	histLogin           // login asked → token answered (chat, notify)
	numHists
)

// counters are the event counts of one second (in a shard) or of a whole run (in totals).
type counters struct {
	connTried, connOpened, connFailed, connDropped int64
	connAbandoned                                  int64 // the user left while connecting
	connUsers                                      int64 // users' first connections in the run
	connReconnects                                 int64 // an activity's connections after its first
	pubSent, pubFailed                             int64
	requests                                       int64 // HTTP requests completed
	received                                       int64 // first receipts, whether expected or not
	outsideWindow                                  int64 // first receipts outside the receiver's delivery window
	duplicates, outOfOrder, gaps                   int64
	bytesIn                                        int64
	errors                                         int64 // failures of any kind
	foreign                                        int64 // messages without our vu/seq/ts
	other                                          int64 // chat messages outside the measurement (ENTER, LEAVE; notify members' chat)
	loginTried, loginFailed                        int64
}

func (c *counters) add(o *counters) {
	c.connTried += o.connTried
	c.connOpened += o.connOpened
	c.connFailed += o.connFailed
	c.connDropped += o.connDropped
	c.connAbandoned += o.connAbandoned
	c.connUsers += o.connUsers
	c.connReconnects += o.connReconnects
	c.pubSent += o.pubSent
	c.pubFailed += o.pubFailed
	c.requests += o.requests
	c.received += o.received
	c.outsideWindow += o.outsideWindow
	c.duplicates += o.duplicates
	c.outOfOrder += o.outOfOrder
	c.gaps += o.gaps
	c.bytesIn += o.bytesIn
	c.errors += o.errors
	c.foreign += o.foreign
	c.other += o.other
	c.loginTried += o.loginTried
	c.loginFailed += o.loginFailed
}

// shard is where a group of virtual users records what happens. Users are spread over a few
// shards (a small multiple of GOMAXPROCS) so the generator keeps a handful of histograms, not
// one per user, and contention stays low. A shard holds the current second only; the
// collector drains it every second into the run's totals and series.
type shard struct {
	mu     sync.Mutex
	hist   [numHists]*hdrhistogram.Histogram // guarded by mu
	c      counters                          // guarded by mu
	errors map[string]int64                  // error texts, whole run; guarded by mu
	first  error                             // the first error as it was (the pre-flight names it); guarded by mu
}

func newShard() *shard {
	s := &shard{errors: make(map[string]int64)}
	for i := range s.hist {
		s.hist[i] = newHist()
	}
	return s
}

// update runs f with the shard locked.
func (s *shard) update(f func(c *counters)) {
	s.mu.Lock()
	f(&s.c)
	s.mu.Unlock()
}

// observe records one latency of kind.
func (s *shard) observe(kind int, d time.Duration) {
	s.mu.Lock()
	recordDur(s.hist[kind], d)
	s.mu.Unlock()
}

// delivered records one first receipt of a publication: its latency when it falls in the
// receiver's delivery window (the deliveries the ratio can count), else it counts as outside.
func (s *shard) delivered(lat time.Duration, bytes int, inWindow bool) {
	s.mu.Lock()
	if inWindow {
		recordDur(s.hist[histDelivery], lat)
	} else {
		s.c.outsideWindow++
	}
	s.c.received++
	s.c.bytesIn += int64(bytes)
	s.mu.Unlock()
}

// fail counts one failure with its (normalised) text.
func (s *shard) fail(err error, f func(c *counters)) {
	txt := errorText(err)
	s.mu.Lock()
	if f != nil {
		f(&s.c)
	}
	s.c.errors++
	s.errors[txt]++
	if s.first == nil {
		s.first = err
	}
	s.mu.Unlock()
}

// collector merges the shards every second. It is owned by the runner's sampling loop.
type collector struct {
	shards []*shard
	total  [numHists]*hdrhistogram.Histogram
	second *hdrhistogram.Histogram // deliveries of the second being collected
	c      counters
}

func newCollector(n int) *collector {
	c := &collector{shards: make([]*shard, n), second: newHist()}
	for i := range c.shards {
		c.shards[i] = newShard()
	}
	for i := range c.total {
		c.total[i] = newHist()
	}
	return c
}

// collect drains every shard: it returns the counts of the second just ended and leaves the
// deliveries of that second in c.second.
func (c *collector) collect() counters {
	var sec counters
	c.second.Reset()
	for _, s := range c.shards {
		s.mu.Lock()
		sec.add(&s.c)
		s.c = counters{}
		c.second.Merge(s.hist[histDelivery])
		for k := range s.hist {
			c.total[k].Merge(s.hist[k])
			s.hist[k].Reset()
		}
		s.mu.Unlock()
	}
	c.c.add(&sec)
	return sec
}

// topErrors returns the most frequent error texts over the run.
func (c *collector) topErrors(n int) []results.Count {
	all := map[string]int64{}
	for _, s := range c.shards {
		s.mu.Lock()
		for k, v := range s.errors {
			all[k] += v
		}
		s.mu.Unlock()
	}
	out := make([]results.Count, 0, len(all))
	for k, v := range all {
		out = append(out, results.Count{Label: k, N: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Label < out[j].Label
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// latencies summarises h (microseconds) in milliseconds.
func latencies(h *hdrhistogram.Histogram) results.Latencies {
	if h.TotalCount() == 0 {
		return results.Latencies{}
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	return results.Latencies{
		Count: h.TotalCount(),
		Min:   ms(h.Min()),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P95:   ms(h.ValueAtQuantile(95)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// histogramBuckets turns h (microseconds) into the latency distribution of the results: ten
// buckets per decade, so that a chart on a log axis shows even bars, and a few dozen buckets
// cover a microsecond to minutes.
func histogramBuckets(h *hdrhistogram.Histogram) []results.Bucket {
	counts := map[int]int64{}
	last := -1
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		k := int(math.Ceil(10 * math.Log10(float64(max(bar.To, 1)))))
		counts[k] += bar.Count
		last = max(last, k)
	}
	var out []results.Bucket
	for k := 0; k <= last; k++ {
		if n := counts[k]; n > 0 {
			upTo, _ := strconv.ParseFloat(strconv.FormatFloat(math.Pow(10, float64(k)/10)/1000, 'g', 4, 64), 64)
			out = append(out, results.Bucket{UpToMs: upTo, Count: n})
		}
	}
	return out
}

var (
	reAddr   = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+(->\d+\.\d+\.\d+\.\d+:\d+)?`)
	reNumber = regexp.MustCompile(`\b\d{3,}\b`)
)

// errorText turns an error into a label that groups alike failures: addresses, ports and
// long numbers are replaced, so "read tcp 127.0.0.1:40312->127.0.0.1:8080: i/o timeout" from
// every user counts as one label.
func errorText(err error) string {
	if err == nil {
		return "unknown"
	}
	var ne net.Error
	s := err.Error()
	if errors.As(err, &ne) && ne.Timeout() && !strings.Contains(s, "timeout") {
		s += " (timeout)"
	}
	s = reAddr.ReplaceAllString(s, "ADDR")
	s = reNumber.ReplaceAllString(s, "N")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
