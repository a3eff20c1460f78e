// Package eventually is how tests wait: they poll what they can observe (a count, a state, an
// answer) until it holds, instead of sleeping for a time that a busy machine may not keep.
// Within is the one poll loop; True and Nil fail the test when it runs out.
package eventually

import (
	"errors"
	"testing"
	"time"
)

// every is the pause between two checks: short next to what tests wait for, long next to a
// check's cost.
const every = 10 * time.Millisecond

// Within calls cond until it returns true or within has passed, and reports whether it did.
// cond is called at least once.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// True waits until cond holds, and fails the test after within, naming what it waited for.
func True(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	Nil(tb, within, func() error {
		if cond() {
			return nil
		}
		return errors.New("still waiting for " + what)
	})
}

// Nil waits until check returns nil, and fails the test after within with check's last error,
// which should say what is still missing.
func Nil(tb testing.TB, within time.Duration, check func() error) {
	tb.Helper()
	var err error
	if !Within(within, func() bool { err = check(); return err == nil }) {
		tb.Fatalf("after %v: %v", within, err)
	}
}
