package store

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// rssFile is this process's file-backed resident memory in bytes (Linux only).
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func bigPub(topic string, off uint64) *hub.Publication {
	p := pub(topic, "ep", off)
	p.Data = json.RawMessage(fmt.Sprintf(`{"text":"%d %s"}`, off, strings.Repeat("x", 4000)))
	return p
}

// TestReleaseMapped reads 12 MiB of publications (the file's pages become the process's
// file-backed memory), releases them, and checks that memory went and that everything still
// reads back the same.
func TestReleaseMapped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RssFile and MADV_DONTNEED's meaning on shared file mappings are Linux's")
	}
	const topics, per = 6, 500 // 3,000 publications of ~4 KB
	s := open(t, Config{NoSync: true, Keep: func(string) int { return per }})
	var n atomic.Int64
	for i := range topics * per {
		s.Append(bigPub(fmt.Sprintf("chat/r%d", i%topics), uint64(i/topics+1)), mustDone(t, &n))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for i := range topics {
			st, ok, err := s.Load(fmt.Sprintf("chat/r%d", i))
			if err != nil || !ok || len(st.Publications) != per {
				t.Fatalf("load chat/r%d: ok %v, %d publications, %v", i, ok, len(st.Publications), err)
			}
			for j, p := range st.Publications {
				samePub(t, p, bigPub(fmt.Sprintf("chat/r%d", i), uint64(j+1)))
			}
		}
	}
	check()
	loaded := rssFile(t)
	if err := s.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	released := rssFile(t)
	t.Logf("file-backed RSS: %d KiB read, %d KiB after the release", loaded>>10, released>>10)
	if loaded-released < 8<<20 {
		t.Errorf("file-backed RSS went from %d KiB to %d KiB; want at least 8 MiB less", loaded>>10, released>>10)
	}
	check()
	if again := rssFile(t); again-released < 8<<20 {
		t.Errorf("reading everything again took file-backed RSS from %d KiB to %d KiB only", released>>10, again>>10)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseMapped(); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestReleaseMappedConcurrent releases the mapping over and over while appenders and readers
// run; every read must still see whole, correct publications (run it with -race).
func TestReleaseMappedConcurrent(t *testing.T) {
	s := open(t, Config{NoSync: true, MaxDelay: -1, Keep: func(string) int { return 200 }})
	const topics = 4
	var tops [topics]atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range topics {
		wg.Add(1)
		go func() { // appender
			defer wg.Done()
			topic := fmt.Sprintf("chat/r%d", i)
			for off := uint64(1); ; off++ {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan error, 1)
				s.Append(bigPub(topic, off), func(err error) { done <- err })
				if err := <-done; err != nil {
					t.Errorf("append %s %d: %v", topic, off, err)
					return
				}
				tops[i].Store(off)
			}
		}()
		wg.Add(1)
		go func() { // reader
			defer wg.Done()
			topic := fmt.Sprintf("chat/r%d", i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := tops[i].Load()
				st, ok, err := s.Load(topic)
				if err != nil {
					t.Errorf("load %s: %v", topic, err)
					return
				}
				if !ok {
					continue
				}
				if st.Top < floor {
					t.Errorf("%s: top %d, below the %d already committed", topic, st.Top, floor)
					return
				}
				for _, p := range st.Publications {
					if want := bigPub(topic, p.Offset); string(p.Data) != string(want.Data) {
						t.Errorf("%s %d: data %.40q, want %.40q", topic, p.Offset, p.Data, want.Data)
						return
					}
				}
			}
		}()
	}
	deadline := time.Now().Add(time.Second)
	releases := 0
	for time.Now().Before(deadline) {
		if err := s.ReleaseMapped(); err != nil {
			t.Fatal(err)
		}
		releases++
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d releases; tops %d %d %d %d", releases, tops[0].Load(), tops[1].Load(), tops[2].Load(), tops[3].Load())
}
