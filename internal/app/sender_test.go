package app

import (
	"encoding/json"
	"testing"
)

func TestWithSender(t *testing.T) {
	for in, want := range map[string]string{
		`{"sender":"ann","m":1}`:                         `{"sender":"mallory","m":1}`,
		`{"m":1, "sender" : "ann" }`:                     `{"m":1, "sender" : "mallory" }`,
		`{"sender":"a","x":{"sender":"b"},"sender":"c"}`: `{"sender":"mallory","x":{"sender":"b"},"sender":"mallory"}`,
		`{"send\u0065r":"ann"}`:                          `{"send\u0065r":"mallory"}`,
		`{"sender":"mallory"}`:                           `{"sender":"mallory"}`,
		`{"m":"no sender field"}`:                        `{"m":"no sender field"}`,
		`"sender"`:                                       `"sender"`,
		`[{"sender":"ann"}]`:                             `[{"sender":"ann"}]`,
	} {
		if got := string(withSender(json.RawMessage(in), "mallory")); got != want {
			t.Errorf("withSender(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzWithSender: whatever the data, the result is valid JSON when the input was, and an
// object's every top-level sender says the user.
func FuzzWithSender(f *testing.F) {
	for _, s := range []string{`{"sender":"ann","message":"hi"}`, `{"send\u0065r":1,"sender":[1]}`, `{}`, `"x"`, `{"a":{"sender":"b"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := withSender(data, "mallory")
		if !json.Valid(data) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("withSender(%s) = %s: not JSON", data, out)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(out, &obj) == nil {
			if s, ok := obj["sender"]; ok && string(s) != `"mallory"` {
				t.Fatalf("withSender(%s) = %s: sender %s", data, out, s)
			}
		}
	})
}
