package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashEnv tells the test binary it is the child of TestCrashSafety.
const crashEnv = "RTLAB_STORE_CRASH_CHILD"

// TestCrashSafety kills a process that is appending (SIGKILL, mid-commit as likely as not) and
// checks the file it leaves: every publication whose done reported success is there, and each
// topic's top matches its newest record with no holes below it.
func TestCrashSafety(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "rtlab.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashSafety$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	committed := map[string]uint64{}
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		topic, off, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(off, 10, 64)
		committed[topic] = max(committed[topic], n)
		if lines++; lines == 200 {
			_ = cmd.Process.Kill()
		}
	}
	_ = cmd.Wait()
	if lines < 200 {
		t.Fatalf("child reported only %d commits", lines)
	}

	s := open(t, Config{Path: path, Keep: func(string) int { return crashKeep }})
	for topic, want := range committed {
		st, ok, err := s.Load(topic)
		if err != nil || !ok {
			t.Fatalf("Load(%s) = %v, %v", topic, ok, err)
		}
		if st.Top < want {
			t.Errorf("%s: top %d, but %d was reported committed", topic, st.Top, want)
		}
		n := len(st.Publications)
		if n != int(min(st.Top, crashKeep)) || st.Publications[n-1].Offset != st.Top {
			t.Fatalf("%s: top %d, %d publications ending at %d", topic, st.Top, n, st.Publications[n-1].Offset)
		}
		for i, p := range st.Publications {
			if p.Offset != st.Top-uint64(n-1-i) {
				t.Fatalf("%s: hole before offset %d", topic, p.Offset)
			}
		}
	}
	t.Logf("killed after %d reported commits on %d topics", lines, len(committed))
}

const crashKeep = 50

// crashChild appends until killed and prints "topic offset" for every 97th success.
func crashChild(path string) {
	s, err := Open(Config{Path: path, MaxBatch: 256, Keep: func(string) int { return crashKeep }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var tops [8]uint64
	for i := 0; ; i++ {
		topic := fmt.Sprintf("chat/%d", i%len(tops))
		tops[i%len(tops)]++
		p := pub(topic, "e", tops[i%len(tops)])
		s.Append(p, func(err error) {
			if err != nil || p.Offset%97 != 0 {
				return
			}
			mu.Lock()
			fmt.Fprintf(w, "%s %d\n", p.Topic, p.Offset)
			_ = w.Flush()
			mu.Unlock()
		})
		if i%1000 == 0 {
			time.Sleep(time.Millisecond) // let commits interleave with appends
		}
	}
}
