package seed

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

// TestConfigAndParams: zero settings take the seed servers' timeouts and a negative SSE
// timeout stays (never); a route without ?group= means group 0; an empty body publishes a
// position as the seed servers generated it.
func TestConfigAndParams(t *testing.T) {
	c := Config{SSETimeout: -1}
	c.fill()
	if c.LongTimeout != 10*time.Second || c.SSETimeout != -1 {
		t.Fatalf("filled %+v", c)
	}
	if g := groupParam(httptest.NewRequest("GET", "/ws", nil)); g != "0" {
		t.Fatalf("no group: %q", g)
	}
	if g := groupParam(httptest.NewRequest("GET", "/ws?group=7", nil)); g != "7" {
		t.Fatalf("group 7: %q", g)
	}
	var pos struct{ X, Y *float64 }
	if err := json.Unmarshal(generatedPosition(), &pos); err != nil || pos.X == nil || pos.Y == nil {
		t.Fatalf("generated position: %v %+v", err, pos)
	}
	d := New(Config{}, nil, nil, nil).Dests()
	if f := d.Forms(true); f != "/pub/share/{g} or /pub/chat/message/{room}" {
		t.Fatalf("SEND forms without the application prefix: %q", f)
	}
	if _, ok := d.Dest("/pub/share/g1", true); !ok {
		t.Fatal("SEND /pub/share/g1 not routed")
	}
	if r, ok := d.Dest("/sub/chat/lobby", false); !ok || r.Topic != "chat/lobby" {
		t.Fatalf("SUBSCRIBE /sub/chat/lobby: %+v %v", r, ok)
	}
}
