package app

import (
	"bytes"
	"encoding/json"

	"github.com/rtlab/rtlab/internal/hub"
)

// withSender returns data with every top-level "sender" field set to user, when data is a JSON
// object whose "sender" says something else; otherwise data unchanged. Seed clients put the
// sender in the data and other seed clients display it, so a client must not be able to speak
// there as someone else. The rest of the object keeps its bytes and order. Every occurrence of
// a repeated key is rewritten: decoders differ in which one they keep.
func withSender(data json.RawMessage, user string) json.RawMessage {
	// A key may be written with escapes ("send\u0065r"), so only data with neither is skipped
	// undecoded.
	if !bytes.Contains(data, []byte("sender")) && !bytes.Contains(data, []byte(`\u`)) {
		return data
	}
	spans := topLevelValues(data, "sender")
	want := hub.AppendJSONString(nil, user)
	differs := false
	for _, s := range spans {
		differs = differs || !bytes.Equal(data[s[0]:s[1]], want)
	}
	if !differs {
		return data
	}
	out := make([]byte, 0, len(data)+len(want))
	last := 0
	for _, s := range spans {
		out = append(out, data[last:s[0]]...)
		out = append(out, want...)
		last = s[1]
	}
	return append(out, data[last:]...)
}

// topLevelValues returns the byte ranges of the values of key in a JSON object; none when
// data is not an object.
func topLevelValues(data []byte, key string) [][2]int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var spans [][2]int
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		before := int(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k == key {
			after := int(dec.InputOffset())
			i := before // skip the colon and blanks before the value
			for i < after && bytes.IndexByte([]byte(": \t\r\n"), data[i]) >= 0 {
				i++
			}
			spans = append(spans, [2]int{i, after})
		}
	}
	return spans
}
