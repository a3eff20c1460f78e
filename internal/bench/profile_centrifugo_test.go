package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
)

// TestBuiltinCentrifugoProfile runs builtin:centrifugo against a real Centrifugo that takes
// only tokens signed with its secret.
func TestBuiltinCentrifugoProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Centrifugo")
	}
	bin := centrifugoOrSkip(t)
	const secret = "profile-secret"
	t.Setenv("CENTRIFUGO_CLIENT_TOKEN_HMAC_SECRET_KEY", secret)
	// Pings every 2 s (the server reads its environment), so that a user that did not answer
	// them would be cut off within the run.
	t.Setenv("CENTRIFUGO_CLIENT_PING_INTERVAL", "2s")
	t.Setenv("CENTRIFUGO_CLIENT_PONG_TIMEOUT", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := peers.StartCentrifugo(ctx, bin, peers.CentrifugoSettings{
		Engine: "memory", HistorySize: 100, HistoryTTL: time.Minute, Secret: secret, APIKey: "unused",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	checkExact(t, profileRun(t, "http://"+s.Addr, "builtin:centrifugo", "ws"))

	// A wrong secret is refused by the server: the pre-flight stops on it.
	t.Setenv("CENTRIFUGO_CLIENT_TOKEN_HMAC_SECRET_KEY", "wrong")
	o := &Options{Target: "http://" + s.Addr, Profile: "builtin:centrifugo", Users: []int{2}, Stages: "1s:PEAK", Interval: 500 * time.Millisecond}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, o); err == nil {
		t.Error("the pre-flight passed with tokens the server refuses")
	} else {
		t.Logf("wrong secret: %v", err)
	}
}
