package transport

import (
	"encoding/json"
	"testing"

	"github.com/rtlab/rtlab/internal/hub"
)

// FuzzHistoryRequest: any history op decodes to a page request or a bad_request error, and
// what is accepted is within the limits.
func FuzzHistoryRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"history","topic":"chat/a","before":4951,"epoch":"mq3k9x","limit":50,"id":7}`,
		`{"op":"history","topic":"chat/a"}`, `{"op":"history","topic":"chat/a","before":-1}`,
		`{"op":"history","topic":"chat/a","limit":100000}`, `{"op":"history","before":1e30}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var req wsHistoryRequest
		if json.Unmarshal(msg, &req) != nil {
			return
		}
		var pp pageParams
		if req.Before != nil {
			pp.before = jsonNumber(*req.Before)
		}
		if req.Limit != nil {
			pp.limit = jsonNumber(uint64(max(*req.Limit, 0)))
			if *req.Limit < 0 {
				pp.limit = "-1"
			}
		}
		o, err := parsePage(pp)
		if err != nil {
			return
		}
		if o.Limit < 0 || o.Limit > hub.MaxPageLimit {
			t.Fatalf("accepted limit %d", o.Limit)
		}
	})
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }
