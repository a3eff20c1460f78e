package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

func open(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "data", "rtlab.db")
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, time.UTC)

func pub(topic, epoch string, off uint64) *hub.Publication {
	return &hub.Publication{
		Topic:  topic,
		Offset: off,
		Epoch:  epoch,
		Time:   t0.Add(time.Duration(off) * time.Millisecond),
		Sender: fmt.Sprintf("user%d", off%7),
		Type:   "TALK",
		Data:   json.RawMessage(fmt.Sprintf(`{"content":"message %d"}`, off)),
	}
}

// mustDone returns a done callback that fails the test on error and counts calls.
func mustDone(t testing.TB, n *atomic.Int64) func(error) {
	return func(err error) {
		if err != nil {
			t.Errorf("done: %v", err)
		}
		n.Add(1)
	}
}

func samePub(t testing.TB, got, want *hub.Publication) {
	t.Helper()
	if got.Topic != want.Topic || got.Offset != want.Offset || got.Epoch != want.Epoch ||
		!got.Time.Equal(want.Time) || got.Sender != want.Sender || got.Type != want.Type ||
		string(got.Data) != string(want.Data) {
		t.Fatalf("loaded %+v\nwant   %+v", got, want)
	}
}

// TestReopen appends 10k publications, closes, reopens and checks Load and ForEach give back
// the same epochs, tops and publications.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "rtlab.db")
	cfg := Config{Path: path, Keep: func(string) int { return 10_000 }}
	s := open(t, cfg)
	topics := []string{"chat/lobby", "chat/a", "location/7", "notify/alice"}
	want := map[string][]*hub.Publication{}
	var n atomic.Int64
	for i := range 10_000 {
		topic := topics[i%len(topics)]
		p := pub(topic, "ep-"+topic, uint64(len(want[topic])+1))
		want[topic] = append(want[topic], p)
		s.Append(p, mustDone(t, &n))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 10_000 {
		t.Fatalf("%d done calls after Close, want 10000", n.Load())
	}

	s = open(t, cfg)
	for _, topic := range topics {
		st, ok, err := s.Load(topic)
		if err != nil || !ok {
			t.Fatalf("Load(%s) = %v, %v", topic, ok, err)
		}
		w := want[topic]
		if st.Epoch != "ep-"+topic || st.Top != uint64(len(w)) || len(st.Publications) != len(w) {
			t.Fatalf("Load(%s): epoch %s top %d, %d publications; want %s %d %d",
				topic, st.Epoch, st.Top, len(st.Publications), "ep-"+topic, len(w), len(w))
		}
		for i := range w {
			samePub(t, st.Publications[i], w[i])
		}
	}
	if _, ok, err := s.Load("chat/never"); ok || err != nil {
		t.Fatalf("Load of an unknown topic = %v, %v", ok, err)
	}
	var seen []string
	err := s.ForEach(func(topic string, st TopicState) error {
		seen = append(seen, topic)
		if st.Top != uint64(len(want[topic])) || len(st.Publications) != len(want[topic]) {
			t.Errorf("ForEach %s: top %d, %d publications", topic, st.Top, len(st.Publications))
		}
		return nil
	})
	if err != nil || len(seen) != len(topics) {
		t.Fatalf("ForEach saw %v, err %v", seen, err)
	}

	// Offsets continue after the restart in the same epoch.
	s.Append(pub("chat/a", "ep-chat/a", 2501), mustDone(t, &n))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := s.Load("chat/a"); st.Top != 2501 {
		t.Fatalf("top after continuing: %d", st.Top)
	}
}

func TestRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rtlab.db")
	keep := 10
	s := open(t, Config{Path: path, MaxBatch: 7, Keep: func(topic string) int {
		if topic == "chat/default" {
			return 0 // means DefaultKeep
		}
		return keep
	}})
	var n atomic.Int64
	for off := uint64(1); off <= 25; off++ {
		s.Append(pub("chat/small", "e", off), mustDone(t, &n))
	}
	for off := uint64(1); off <= DefaultKeep+5; off++ {
		s.Append(pub("chat/default", "e", off), mustDone(t, &n))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _, err := s.Load("chat/small")
	if err != nil {
		t.Fatal(err)
	}
	if st.Top != 25 || len(st.Publications) != 10 || st.Publications[0].Offset != 16 || st.Publications[9].Offset != 25 {
		t.Fatalf("top %d, %d publications from %d", st.Top, len(st.Publications), st.Publications[0].Offset)
	}
	if got := countRecords(t, s, "chat/small"); got != 10 {
		t.Fatalf("%d records on disk, want 10", got)
	}
	if got := countRecords(t, s, "chat/default"); got != DefaultKeep {
		t.Fatalf("%d records on disk for the default, want %d", got, DefaultKeep)
	}

	// A smaller Keep after a restart shows at once in Load, and on disk after the next append.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	keep = 3
	s = open(t, Config{Path: path, Keep: func(string) int { return keep }})
	st, _, _ = s.Load("chat/small")
	if len(st.Publications) != 3 || st.Publications[0].Offset != 23 {
		t.Fatalf("after shrinking Keep: %d publications from %d", len(st.Publications), st.Publications[0].Offset)
	}
	s.Append(pub("chat/small", "e", 26), mustDone(t, &n))
	_ = s.Flush()
	if got := countRecords(t, s, "chat/small"); got != 3 {
		t.Fatalf("%d records on disk, want 3", got)
	}
}

func countRecords(t *testing.T, s *Store, topic string) int {
	t.Helper()
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := appendPrefix(nil, topic)
		c := tx.Bucket(bucketPubs).Cursor()
		for k, _ := c.Seek(prefix); k != nil && string(k[:min(len(k), len(prefix))]) == string(prefix); k, _ = c.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDoneOrder checks that done runs in Append order across topics, once each, and only
// after the publication is readable from the file.
func TestDoneOrder(t *testing.T) {
	s := open(t, Config{MaxBatch: 50, MaxDelay: 100 * time.Microsecond})
	const total = 5000
	var (
		mu    sync.Mutex
		order []int
	)
	tops := map[string]uint64{}
	for i := range total {
		topic := fmt.Sprintf("chat/%d", i%13)
		tops[topic]++
		p := pub(topic, "e", tops[topic])
		s.Append(p, func(err error) {
			if err != nil {
				t.Errorf("done %d: %v", i, err)
			}
			if i%97 == 0 {
				st, ok, err := s.Load(p.Topic)
				if err != nil || !ok || st.Top < p.Offset {
					t.Errorf("done %d ran before commit: top %d < %d (%v)", i, st.Top, p.Offset, err)
				}
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != total {
		t.Fatalf("%d done calls, want %d", len(order), total)
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("done call %d was for append %d", i, got)
		}
	}
	if st := s.Stats(); st.Publications != total || st.Batches < total/50 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCloseFlushes checks that Close commits what is still waiting for its batch.
func TestCloseFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rtlab.db")
	s := open(t, Config{Path: path, MaxBatch: 1 << 20, MaxDelay: time.Hour})
	var n atomic.Int64
	for off := uint64(1); off <= 100; off++ {
		s.Append(pub("chat/x", "e", off), mustDone(t, &n))
	}
	time.Sleep(10 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("%d done calls before the batch could be committed", n.Load())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 100 {
		t.Fatalf("%d done calls after Close, want 100", n.Load())
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var got error
	s.Append(pub("chat/x", "e", 101), func(err error) { got = err })
	if !errors.Is(got, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", got)
	}
	if err := s.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v, want ErrClosed", err)
	}

	s = open(t, Config{Path: path})
	if st, _, _ := s.Load("chat/x"); st.Top != 100 || len(st.Publications) != 100 {
		t.Fatalf("after reopen: top %d, %d publications", st.Top, len(st.Publications))
	}
}

// TestMaxDelay checks that a lone publication is committed after about MaxDelay, not when
// the batch fills.
func TestMaxDelay(t *testing.T) {
	s := open(t, Config{MaxBatch: 1000, MaxDelay: 20 * time.Millisecond, NoSync: true})
	ch := make(chan time.Time, 1)
	start := time.Now()
	s.Append(pub("chat/x", "e", 1), func(error) { ch <- time.Now() })
	select {
	case at := <-ch:
		if d := at.Sub(start); d < 20*time.Millisecond {
			t.Fatalf("committed after %v, before MaxDelay", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a lone publication was never committed")
	}
	// Negative MaxDelay: no lingering.
	s2 := open(t, Config{MaxBatch: 1000, MaxDelay: -1, NoSync: true})
	start = time.Now()
	s2.Append(pub("chat/x", "e", 1), func(error) { ch <- time.Now() })
	if d := (<-ch).Sub(start); d > time.Second {
		t.Fatalf("no-linger commit took %v", d)
	}
}

func TestEpochChange(t *testing.T) {
	s := open(t, Config{})
	var n atomic.Int64
	for off := uint64(1); off <= 5; off++ {
		s.Append(pub("chat/x", "old", off), mustDone(t, &n))
	}
	_ = s.Flush()
	for off := uint64(1); off <= 3; off++ {
		s.Append(pub("chat/x", "new", off), mustDone(t, &n))
	}
	_ = s.Flush()
	st, _, err := s.Load("chat/x")
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != "new" || st.Top != 3 || len(st.Publications) != 3 {
		t.Fatalf("epoch %s top %d, %d publications", st.Epoch, st.Top, len(st.Publications))
	}
	for _, p := range st.Publications {
		if p.Epoch != "new" {
			t.Fatalf("publication %d of epoch %s survived the reset", p.Offset, p.Epoch)
		}
	}
	// Both epochs in one batch.
	s.Append(pub("chat/y", "a", 1), mustDone(t, &n))
	s.Append(pub("chat/y", "a", 2), mustDone(t, &n))
	s.Append(pub("chat/y", "b", 1), mustDone(t, &n))
	_ = s.Flush()
	if st, _, _ := s.Load("chat/y"); st.Epoch != "b" || st.Top != 1 || len(st.Publications) != 1 {
		t.Fatalf("same-batch reset: epoch %s top %d, %d publications", st.Epoch, st.Top, len(st.Publications))
	}
}

// TestRefused checks that a bad publication fails alone, without its batch.
func TestRefused(t *testing.T) {
	s := open(t, Config{MaxDelay: time.Hour})
	errs := make([]error, 5)
	record := func(i int) func(error) { return func(err error) { errs[i] = err } }
	s.Append(pub("chat/x", "e", 1), record(0))
	s.Append(pub("chat/x", "e", 1), record(1)) // repeated offset
	s.Append(pub("chat/x", "e", 3), record(2)) // a gap is allowed (an earlier batch failed)
	s.Append(pub("", "e", 1), record(3))
	s.Append(pub("chat/\x00", "e", 1), record(4))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, ErrOutOfOrder, nil, ErrBadTopic, ErrBadTopic}
	for i := range want {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
			t.Errorf("append %d: %v, want %v", i, errs[i], want[i])
		}
	}
	if st, _, _ := s.Load("chat/x"); st.Top != 3 || len(st.Publications) != 2 {
		t.Fatalf("top %d, %d publications", st.Top, len(st.Publications))
	}
	if st := s.Stats(); st.Publications != 2 || st.Failed != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestConcurrentAppenders runs many appenders on many topics (go test -race) and checks every
// topic's done calls come in offset order and everything is stored.
func TestConcurrentAppenders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rtlab.db")
	s := open(t, Config{Path: path, MaxBatch: 64, Keep: func(string) int { return 100 }})
	const (
		appenders = 8
		topics    = 25 // per appender
		perTopic  = 150
	)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		last = map[string]uint64{}
	)
	for a := range appenders {
		wg.Go(func() {
			for i := range topics * perTopic {
				topic := fmt.Sprintf("chat/%d-%d", a, i%topics)
				p := pub(topic, "e", uint64(i/topics+1))
				s.Append(p, func(err error) {
					if err != nil {
						t.Errorf("done: %v", err)
					}
					mu.Lock()
					defer mu.Unlock()
					if last[p.Topic]+1 != p.Offset {
						t.Errorf("%s: done for %d after %d", p.Topic, p.Offset, last[p.Topic])
					}
					last[p.Topic] = p.Offset
				})
			}
		})
	}
	// Readers run during the writes.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := s.Load("chat/0-0"); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, Config{Path: path, Keep: func(string) int { return 100 }})
	count := 0
	err := s.ForEach(func(topic string, st TopicState) error {
		count++
		if st.Top != perTopic || len(st.Publications) != 100 || st.Publications[0].Offset != perTopic-99 {
			t.Errorf("%s: top %d, %d publications", topic, st.Top, len(st.Publications))
		}
		return nil
	})
	if err != nil || count != appenders*topics {
		t.Fatalf("ForEach: %d topics, %v", count, err)
	}
}

// TestBackpressure checks that Append blocks once MaxQueue publications wait, instead of
// queueing without bound while done (the fan-out) is stuck.
func TestBackpressure(t *testing.T) {
	s := open(t, Config{MaxBatch: 4, MaxQueue: 8, MaxDelay: -1, NoSync: true})
	release := make(chan struct{})
	var n atomic.Int64
	s.Append(pub("chat/x", "e", 1), func(error) { <-release; n.Add(1) })
	returned := make(chan struct{})
	go func() {
		for off := uint64(2); off <= 100; off++ {
			s.Append(pub("chat/x", "e", off), func(error) { n.Add(1) })
		}
		close(returned)
	}()
	eventually.True(t, 10*time.Second, "the queue to fill to MaxQueue 8", func() bool { return s.Stats().Queued >= 8 })
	select {
	case <-returned:
		t.Fatal("100 Appends returned while the notifier was stuck")
	case <-time.After(50 * time.Millisecond):
	}
	if q := s.Stats().Queued; q != 8 {
		t.Fatalf("queued %d, want MaxQueue 8", q)
	}
	close(release)
	<-returned
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 100 {
		t.Fatalf("%d done calls, want 100", n.Load())
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open without a path succeeded")
	}
	path := filepath.Join(t.TempDir(), "rtlab.db")
	_ = open(t, Config{Path: path})
	start := time.Now()
	if _, err := Open(Config{Path: path}); err == nil {
		t.Fatal("a second Open of a file in use succeeded")
	} else if time.Since(start) > 5*time.Second {
		t.Fatalf("second Open took %v", time.Since(start))
	}
}

func TestCodec(t *testing.T) {
	tests := []*hub.Publication{
		pub("chat/x", "e", 1),
		{Topic: "t", Offset: 1 << 62, Epoch: "e"}, // zero time, nothing else
		{Topic: "t", Offset: 7, Epoch: "", Time: time.Unix(-5, 999_999_999).UTC(), Data: []byte(`"x"`)}, // before 1970
		{Topic: "t", Offset: 8, Epoch: "e", Time: t0, Sender: "ålice ünïcode", Type: "ENTER", Data: []byte(`{"a":[1,2,{"b":null}]}`)},
	}
	var d decoder
	for _, p := range tests {
		v := appendRecord(nil, p)
		got, err := d.decode(p.Topic, p.Epoch, p.Offset, v)
		if err != nil {
			t.Fatal(err)
		}
		samePub(t, got, p)
		if p.Time.IsZero() != got.Time.IsZero() {
			t.Fatalf("zero time became %v", got.Time)
		}
		// Every truncation of the header is an error, never a panic.
		hdr := len(v) - len(p.Data)
		for i := range hdr {
			if _, err := d.decode(p.Topic, p.Epoch, p.Offset, v[:i]); err == nil && i < hdr {
				t.Fatalf("truncated record of %d/%d bytes decoded", i, hdr)
			}
		}
	}
}

func TestCorruptRow(t *testing.T) {
	s := open(t, Config{})
	s.Append(pub("chat/x", "e", 1), nil)
	s.Append(pub("chat/x", "e", 2), nil)
	_ = s.Flush()
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPubs).Put(appendKey(nil, "chat/x", 2), []byte{recordVersion, 0x80})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load("chat/x"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a damaged record: %v, want ErrCorrupt", err)
	}
	if err := s.ForEach(func(string, TopicState) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ForEach over a damaged record: %v, want ErrCorrupt", err)
	}
}
