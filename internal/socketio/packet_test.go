package socketio

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodePacket(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want packet
		err  string
	}{
		{in: `0{"sid":"x"}`, want: packet{typ: '0', nsp: "/", ack: -1, data: []byte(`{"sid":"x"}`)}},
		{in: `0/admin,{"sid":"x"}`, want: packet{typ: '0', nsp: "/admin", ack: -1, data: []byte(`{"sid":"x"}`)}},
		{in: `1/admin,`, want: packet{typ: '1', nsp: "/admin", ack: -1}},
		{in: `1`, want: packet{typ: '1', nsp: "/", ack: -1}},
		{in: `2["location",{"a":1}]`, want: packet{typ: '2', nsp: "/", ack: -1, data: []byte(`["location",{"a":1}]`)}},
		{in: `2/g,12["e"]`, want: packet{typ: '2', nsp: "/g", ack: 12, data: []byte(`["e"]`)}},
		{in: `312["joined"]`, want: packet{typ: '3', nsp: "/", ack: 12, data: []byte(`["joined"]`)}},
		{in: `4{"message":"not authorized"}`, want: packet{typ: '4', nsp: "/", ack: -1, data: []byte(`{"message":"not authorized"}`)}},
		{in: `/x`, err: "unknown packet type"},
		{in: `9`, err: "unknown packet type"},
		{in: ``, err: "empty packet"},
		{in: `51-["a",{"_placeholder":true,"num":0}]`, err: "binary"},
		{in: `2["a"`, err: "not JSON"},
		{in: `21234567890123456["a"]`, err: "digits"},
	} {
		got, err := decodePacket([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("decode %q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.typ != tc.want.typ || got.nsp != tc.want.nsp || got.ack != tc.want.ack || string(got.data) != string(tc.want.data) {
			t.Errorf("decode %q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestSplitPayload(t *testing.T) {
	got, err := splitPayload([]byte("2\x1e42[\"a\"]\x1e6"))
	if err != nil || len(got) != 3 || string(got[1]) != `42["a"]` {
		t.Fatalf("split: %q %v", got, err)
	}
	for _, in := range []string{"", "2\x1e", "\x1e2", "bAQI="} {
		if _, err := splitPayload([]byte(in)); err == nil {
			t.Errorf("split %q: no error", in)
		}
	}
	if _, err := splitPayload([]byte("bAQI=")); !errors.Is(err, ErrBinary) {
		t.Errorf("split of a binary packet: %v, want ErrBinary", err)
	}
}

func TestEncode(t *testing.T) {
	p, err := encodeEvent("/", -1, "location", []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`2`)})
	if err != nil || string(p) != `42["location",{"a":1},2]` {
		t.Fatalf("encode: %s %v", p, err)
	}
	p, err = encodeEvent("/g", 7, `a"b`, nil)
	if err != nil || string(p) != `42/g,7["a\"b"]` {
		t.Fatalf("encode: %s %v", p, err)
	}
	if _, err := encodeEvent("/", -1, "x", []json.RawMessage{json.RawMessage(`{`)}); err == nil {
		t.Fatal("encode of a bad argument: no error")
	}
	for nsp, want := range map[string]string{"/": "40", "/secure": "40/secure,"} {
		if p, _ := encodeConnect(nsp, nil); string(p) != want {
			t.Errorf("connect %s: %s, want %s", nsp, p, want)
		}
	}
	if p, _ := encodeConnect("/s", json.RawMessage(`{"token":"t"}`)); string(p) != `40/s,{"token":"t"}` {
		t.Errorf("connect with auth: %s", p)
	}
}

// FuzzDecodePayload feeds a polling payload through everything that reads server input: the
// split, the open packet, the Socket.IO packet and its event, ack and error data.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		`0{"sid":"a","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}`,
		"2\x1e42[\"location\",{\"lat\":1}]\x1e6",
		`40{"sid":"x"}`, `40/secure,{"sid":"x"}`, `44/secure,{"message":"not authorized"}`,
		`43/g,12["joined"]`, `451-["a",{"_placeholder":true,"num":0}]`, `41`, "bAQI=", "3probe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pkts, err := splitPayload(b)
		if err != nil {
			return
		}
		var c Conn
		_, _ = c.open(pkts[0])
		for _, p := range pkts {
			if len(p) < 1 || p[0] != eioMessage {
				continue
			}
			pk, err := decodePacket(p[1:])
			if err != nil {
				continue
			}
			_, _, _ = eventArgs(pk.data)
			_, _ = ackArgs(pk.data)
			_ = connectError(pk.data)
		}
	})
}
