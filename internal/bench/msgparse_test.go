package bench

import (
	"testing"
)

func TestParseMsg(t *testing.T) {
	pub := `{"op":"message","topic":"location/7","offset":14,"epoch":"mq3k9x","time":"2026-11-21T19:40:01.123Z","sender":"a\"b","data":{"x":1.5,"y":-2e3,"nested":{"vu":99},"vu":17,"seq":3,"ts":1712345678901234567}}`
	var m wireMsg
	if err := parseMsg([]byte(pub), &m); err != nil {
		t.Fatal(err)
	}
	if string(m.op) != "message" || string(m.topic) != "location/7" || m.offset != 14 || string(m.epoch) != "mq3k9x" {
		t.Errorf("header fields: %+v", m)
	}
	if d := m.data; !d.ok || d.vu != 17 || d.seq != 3 || d.ts != 1712345678901234567 {
		t.Errorf("data fields: %+v", d)
	}

	poll := `{"topic":"location/7","epoch":"e","offset":3,"recovered":false,"reason":"gone","publications":[` +
		`{"topic":"location/7","offset":2,"epoch":"e","data":{"vu":1,"seq":0,"ts":5}} ,` +
		`{"topic":"location/7","offset":3,"epoch":"e","data":"not ours"}]}`
	if err := parseMsg([]byte(poll), &m); err != nil {
		t.Fatal(err)
	}
	if !m.hasRecov || m.recovered || string(m.reason) != "gone" || m.offset != 3 {
		t.Errorf("poll fields: %+v", m)
	}
	var offs []uint64
	var oks []bool
	err := eachElement(m.pubs, func(e []byte) error {
		var p wireMsg
		if err := parseMsg(e, &p); err != nil {
			return err
		}
		offs = append(offs, p.offset)
		oks = append(oks, p.data.ok)
		return nil
	})
	if err != nil || len(offs) != 2 || offs[0] != 2 || offs[1] != 3 || !oks[0] || oks[1] {
		t.Errorf("publications: %v %v %v", offs, oks, err)
	}
	if err := eachElement([]byte(" [ ] "), func([]byte) error { t.Error("element in empty list"); return nil }); err != nil {
		t.Error(err)
	}

	ack := `{"op":"ack","id":42,"topic":"location/7","offset":9,"epoch":"e"}`
	if err := parseMsg([]byte(ack), &m); err != nil || !m.hasID || m.id != 42 {
		t.Errorf("ack: %+v %v", m, err)
	}

	for _, bad := range []string{``, `{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `[1]`, `{"a":"x}`, `{"offset":"x"}`} {
		if err := parseMsg([]byte(bad), &m); err == nil {
			t.Errorf("parseMsg(%q) succeeded", bad)
		}
	}
}

func TestParseMsgAllocatesNothing(t *testing.T) {
	b := []byte(`{"op":"message","topic":"location/7","offset":14,"epoch":"mq3k9x","time":"2026-11-21T19:40:01.123Z","data":{"x":1.5,"y":2,"vu":17,"seq":3,"ts":1712345678901234567}}`)
	var m wireMsg
	n := testing.AllocsPerRun(100, func() {
		if err := parseMsg(b, &m); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("parseMsg allocates %.1f times per message", n)
	}
}

func BenchmarkParseMsg(b *testing.B) {
	msg := []byte(`{"op":"message","topic":"location/7","offset":14,"epoch":"mq3k9x","time":"2026-11-21T19:40:01.123Z","data":{"x":1.5,"y":2,"vu":17,"seq":3,"ts":1712345678901234567}}`)
	var m wireMsg
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		_ = parseMsg(msg, &m)
	}
}
