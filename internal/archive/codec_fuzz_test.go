package archive

import (
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// FuzzDecodeRecord: any bytes in the archive file decode to a publication or an error, never a
// panic, and what encodeRecord wrote decodes to the same publication.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(nil, &hub.Publication{Time: time.UnixMilli(1700000000123), Sender: "ann", Type: "TALK", Data: []byte(`{"m":1}`)}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := decodeRecord("chat/a", "e", 7, v)
		if err != nil {
			return
		}
		again, err := decodeRecord("chat/a", "e", 7, encodeRecord(nil, p))
		if err != nil || again.Sender != p.Sender || again.Type != p.Type || string(again.Data) != string(p.Data) || !again.Time.Equal(p.Time) {
			t.Fatalf("round trip of %+v: %+v, %v", p, again, err)
		}
	})
}
