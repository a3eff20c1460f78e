package transport

import (
	"errors"
	"testing"

	"github.com/rtlab/rtlab/internal/hub"
)

// TestOutcomeUnknownIsNotUnavailable: an unknown outcome is told as such even when its cause
// is a broker's outage, and never as "not published".
func TestOutcomeUnknownIsNotUnavailable(t *testing.T) {
	err := hub.OutcomeUnknown("redis", hub.Unavailable("redis", errors.New("read: i/o timeout")))
	if code, status := errorCode(err); code != "outcome_unknown" || status != 504 {
		t.Fatalf("errorCode = %s %d, want outcome_unknown 504", code, status)
	}
	if code, _ := errorCode(hub.Unavailable("redis", errors.New("down"))); code != "unavailable" {
		t.Fatalf("an outage is %s, want unavailable", code)
	}
}

// TestUnresolvedHoldsOtherPublishes: after a keyed publish's unknown outcome, the connection's
// other publishes are refused as not published until the same key's retry is answered; unkeyed
// unknowns hold nothing, as they cannot be retried safely.
func TestUnresolvedHoldsOtherPublishes(t *testing.T) {
	var u unresolved
	first := hub.PublishRequest{Topic: "a", Key: "k1"}
	other := hub.PublishRequest{Topic: "b", Key: "k2"}
	unknown := hub.OutcomeUnknown("redis", errors.New("timeout"))
	u.settle(hub.PublishRequest{Topic: "a"}, unknown)
	if err := u.check(other); err != nil {
		t.Fatalf("an unkeyed unknown held the connection: %v", err)
	}
	u.settle(first, unknown)
	if err := u.check(other); !errors.Is(err, hub.ErrNotReady) {
		t.Fatalf("another publish while one is unresolved: %v, want refused as not published", err)
	}
	if err := u.check(hub.PublishRequest{Topic: "b", Key: "k1"}); err == nil {
		t.Fatal("the same key on another topic passed as the retry")
	}
	if err := u.check(first); err != nil {
		t.Fatalf("the retry itself: %v", err)
	}
	u.settle(first, hub.Unavailable("redis", errors.New("down")))
	if u.check(other) == nil {
		t.Fatal("a retry refused as not published released the hold: the first may still land")
	}
	u.settle(first, nil)
	if err := u.check(other); err != nil {
		t.Fatalf("after the retry's answer: %v", err)
	}
}
