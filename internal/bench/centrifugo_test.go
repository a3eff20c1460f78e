package bench

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
)

// Messages as Centrifugo v6 sends them (taken from a running server): replies, pushes, the
// unidirectional connect, a recovery, an error and the ping.
var cfSamples = []struct {
	name string
	in   string
	want cfMsg
}{
	{"connect reply", `{"id":1,"connect":{"client":"9545d96e","version":"6.9.1 OSS","ping":25,"pong":true}}`,
		cfMsg{id: 1, connect: true, pong: true}},
	{"subscribe reply", `{"id":2,"subscribe":{"recoverable":true,"epoch":"PdIniNSH","offset":2,"positioned":true}}`,
		cfMsg{id: 2, sub: true, epoch: []byte("PdIniNSH"), offset: 2}},
	{"recovered", `{"id":2,"subscribe":{"recoverable":true,"epoch":"PdIniNSH","publications":[{"data":{"x":1,"vu":3,"seq":1,"ts":6},"offset":2}],"recovered":true,"offset":1,"positioned":true,"was_recovering":true}}`,
		cfMsg{id: 2, sub: true, epoch: []byte("PdIniNSH"), offset: 1, recovered: true, wasRecovering: true,
			pubs: []byte(`[{"data":{"x":1,"vu":3,"seq":1,"ts":6},"offset":2}]`)}},
	{"history lost", `{"id":2,"subscribe":{"recoverable":true,"epoch":"other","offset":3,"positioned":true,"was_recovering":true}}`,
		cfMsg{id: 2, sub: true, epoch: []byte("other"), offset: 3, wasRecovering: true}},
	{"publish reply", `{"id":19,"publish":{}}`, cfMsg{id: 19, publish: true}},
	{"error reply", `{"id":19,"error":{"code":103,"message":"permission denied"}}`,
		cfMsg{id: 19, err: true, errCode: 103, errMsg: []byte("permission denied")}},
	{"publication push", `{"push":{"channel":"location/7","pub":{"data":{"vu":1,"seq":0,"ts":7},"info":{"user":"","client":"95"},"offset":3}}}`,
		cfMsg{pub: true, channel: []byte("location/7"), offset: 3, data: dataFields{vu: 1, seq: 0, ts: 7, ok: true}}},
	{"unidirectional connect", `{"connect":{"client":"42a1","version":"6.9.1 OSS","subs":{"location/7":{"recoverable":true,"epoch":"PdIniNSH","positioned":true}},"ping":25,"session":"552b"}}`,
		cfMsg{connect: true, sub: true, subChannel: []byte("location/7"), epoch: []byte("PdIniNSH")}},
	{"unidirectional publication", `{"channel":"location/7","pub":{"data":{"x":1,"vu":3,"seq":0,"ts":5},"offset":1,"epoch":"PdIniNSH"}}`,
		cfMsg{pub: true, channel: []byte("location/7"), offset: 1, epoch: []byte("PdIniNSH"), data: dataFields{vu: 3, seq: 0, ts: 5, ok: true}}},
	{"disconnect push", `{"push":{"disconnect":{"code":3001,"reason":"shutdown","reconnect":true}}}`,
		cfMsg{disconnect: true, code: 3001, reason: []byte("shutdown")}},
	{"unsubscribe push", `{"push":{"channel":"location/7","unsubscribe":{"code":2000,"reason":"server unsubscribe"}}}`,
		cfMsg{disconnect: true, unsubscribe: true, channel: []byte("location/7"), code: 2000, reason: []byte("server unsubscribe")}},
	{"ping", `{}`, cfMsg{empty: true}},
}

func TestParseCentrifugo(t *testing.T) {
	for _, tt := range cfSamples {
		t.Run(tt.name, func(t *testing.T) {
			var m cfMsg
			if err := parseCf([]byte(tt.in), &m); err != nil {
				t.Fatal(err)
			}
			if got, want := describeCf(&m), describeCf(&tt.want); got != want {
				t.Errorf("parsed as\n%s\nwant\n%s", got, want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"id":-1}`, `{"id":1,"error":[]}`, `{"push":{"pub":{"offset":"x"}}}`, `[]`, `{"subscribe":{"offset":1.5}}`} {
		var m cfMsg
		if err := parseCf([]byte(bad), &m); err == nil {
			t.Errorf("%q parsed without error: %s", bad, describeCf(&m))
		}
	}
}

// describeCf prints every field of m, byte slices as text, for comparisons and messages.
func describeCf(m *cfMsg) string {
	b, _ := json.Marshal(map[string]any{
		"id": m.id, "empty": m.empty, "err": m.err, "errCode": m.errCode, "errMsg": string(m.errMsg),
		"connect": m.connect, "pong": m.pong, "sub": m.sub, "subChannel": string(m.subChannel), "epoch": string(m.epoch),
		"offset": m.offset, "recovered": m.recovered, "wasRecovering": m.wasRecovering, "pubs": string(m.pubs),
		"publish": m.publish, "pub": m.pub, "channel": string(m.channel), "data": []any{m.data.vu, m.data.seq, m.data.ts, m.data.ok},
		"disconnect": m.disconnect, "unsubscribe": m.unsubscribe, "code": m.code, "reason": string(m.reason),
	})
	return string(b)
}

func TestCentrifugoRecoveredPublications(t *testing.T) {
	var m cfMsg
	in := `{"id":2,"subscribe":{"epoch":"e","publications":[{"data":{"vu":3,"seq":1,"ts":6},"offset":2},{"data":{"vu":1,"seq":0,"ts":7},"info":{"client":"c"},"offset":3,"epoch":"e"}],"recovered":true,"offset":1,"was_recovering":true}}`
	if err := parseCf([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := eachCfPublication(m.pubs, func(p *cfMsg, raw []byte) {
		b, _ := json.Marshal([]any{p.offset, string(p.epoch), p.data.vu, p.data.seq, p.data.ts, p.data.ok, json.Valid(raw)})
		got = append(got, string(b))
	})
	if want := `[2,"",3,1,6,true,true] [3,"e",1,0,7,true,true]`; err != nil || strings.Join(got, " ") != want {
		t.Errorf("publications %v, %v; want %s", got, err, want)
	}
	if err := eachCfPublication([]byte(`[{"offset":"x"}]`), func(*cfMsg, []byte) {}); err == nil {
		t.Error("a malformed publication passed")
	}
}

func TestCentrifugoCommands(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{string(appendCfConnect(nil, "")), `{"id":1,"connect":{"name":"rtlab-bench"}}`},
		{string(appendCfConnect(nil, "a.b.c")), `{"id":1,"connect":{"token":"a.b.c","name":"rtlab-bench"}}`},
		{string(appendCfSubscribe(nil, "location/7", false, 0, "")), `{"id":2,"subscribe":{"channel":"location/7"}}`},
		{string(appendCfSubscribe(nil, "location/7", true, 12, "ep")), `{"id":2,"subscribe":{"channel":"location/7","recover":true,"offset":12,"epoch":"ep"}}`},
		{string(appendCfPublish(nil, 4, "location/7", []byte(`{"vu":1}`))), `{"id":20,"publish":{"channel":"location/7","data":{"vu":1}}}`},
	} {
		if tt.got != tt.want || !json.Valid([]byte(tt.got)) {
			t.Errorf("command %s, want %s", tt.got, tt.want)
		}
	}
	for _, tt := range []struct {
		token   string
		recover bool
		want    string
	}{
		{"", false, `{}`},
		{"t", false, `{"token":"t"}`},
		{"t", true, `{"token":"t","subs":{"location/7":{"recover":true,"offset":5,"epoch":"ep"}}}`},
		{"", true, `{"subs":{"location/7":{"recover":true,"offset":5,"epoch":"ep"}}}`},
	} {
		q := cfUniConnect(tt.token, "location/7", tt.recover, 5, "ep")
		got, err := url.QueryUnescape(q)
		if err != nil || got != tt.want || !json.Valid([]byte(got)) {
			t.Errorf("cf_connect %q decodes to %q (%v), want %s", q, got, err, tt.want)
		}
	}
}

func TestCentrifugoToken(t *testing.T) {
	secret := []byte("s3cret")
	tok := cfToken(secret, "u7", []string{"location/7"}, 1700000000)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d parts", tok, len(parts))
	}
	enc := base64.RawURLEncoding
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if got := enc.EncodeToString(mac.Sum(nil)); got != parts[2] {
		t.Errorf("signature %s, want %s", parts[2], got)
	}
	var header, claims map[string]any
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := enc.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			t.Fatalf("part %d of %q does not decode", i, tok)
		}
	}
	if header["alg"] != "HS256" || claims["sub"] != "u7" || claims["exp"] != 1700000000.0 || len(claims["channels"].([]any)) != 1 {
		t.Errorf("header %v claims %v", header, claims)
	}
	if strings.Contains(cfToken(secret, "u7", nil, 1), "channels") {
		t.Error("a bidirectional token names channels")
	}
}

func TestRTLabHistory(t *testing.T) {
	for _, tt := range []struct {
		args []string
		size int
		ttl  time.Duration
	}{
		{nil, 100, 10 * time.Minute},
		{[]string{"--queue-bytes", "65536"}, 100, 10 * time.Minute},
		{[]string{"--history-size", "500", "--history-ttl=2m"}, 500, 2 * time.Minute},
		{[]string{"-history-size=7", "--history-ttl", "0"}, 7, 10 * time.Minute},
	} {
		size, ttl := rtlabHistory(tt.args)
		if size != tt.size || ttl != tt.ttl {
			t.Errorf("%q: history %d %s, want %d %s", tt.args, size, ttl, tt.size, tt.ttl)
		}
	}
}

// TestCentrifugoConfig checks the config the lab writes, and, where a centrifugo binary is
// installed, that Centrifugo itself accepts it (centrifugo checkconfig).
func TestCentrifugoConfig(t *testing.T) {
	for _, s := range []peers.CentrifugoSettings{
		{Port: 8123, Engine: "memory", HistorySize: 100, HistoryTTL: 10 * time.Minute, Secret: "k", Insecure: true, APIKey: "a"},
		{Port: 8124, Engine: "redis://127.0.0.1:6379/0", HistorySize: 7, HistoryTTL: 90 * time.Second, Secret: "k", APIKey: "a"},
	} {
		b, err := peers.CentrifugoConfig(s)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			HTTPServer struct {
				Address string `json:"address"`
				Port    int    `json:"port"`
			} `json:"http_server"`
			Engine struct {
				Type  string `json:"type"`
				Redis struct {
					Address []string `json:"address"`
				} `json:"redis"`
			} `json:"engine"`
			Client struct {
				Insecure bool `json:"insecure"`
				Token    struct {
					Key string `json:"hmac_secret_key"`
				} `json:"token"`
			} `json:"client"`
			Channel struct {
				Default struct {
					Size      int    `json:"history_size"`
					TTL       string `json:"history_ttl"`
					Recovery  bool   `json:"force_recovery"`
					Subscribe bool   `json:"allow_subscribe_for_client"`
					Publish   bool   `json:"allow_publish_for_client"`
				} `json:"without_namespace"`
			} `json:"channel"`
			API struct {
				Key string `json:"key"`
			} `json:"http_api"`
			UniSSE struct {
				Enabled bool `json:"enabled"`
			} `json:"uni_sse"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		d := cfg.Channel.Default
		ok := cfg.HTTPServer.Address == "127.0.0.1" && cfg.HTTPServer.Port == s.Port &&
			cfg.Client.Insecure == s.Insecure && cfg.Client.Token.Key == s.Secret && cfg.API.Key == s.APIKey && cfg.UniSSE.Enabled &&
			d.Size == s.HistorySize && d.TTL == s.HistoryTTL.String() && d.Recovery && d.Subscribe && d.Publish
		if s.Engine == "memory" {
			ok = ok && cfg.Engine.Type == "memory"
		} else {
			ok = ok && cfg.Engine.Type == "redis" && len(cfg.Engine.Redis.Address) == 1 && cfg.Engine.Redis.Address[0] == s.Engine
		}
		if !ok {
			t.Errorf("settings %+v wrote\n%s", s, b)
		}
		o := peerOptions(t)
		bin, err := o.centrifugoBinary()
		if err != nil && os.Getenv("RTLAB_REQUIRE_PEERS") != "" {
			t.Fatalf("%v (and RTLAB_REQUIRE_PEERS is set)", err)
		}
		if err == nil {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "checkconfig", "--config", path).CombinedOutput(); err != nil {
				t.Errorf("centrifugo checkconfig refuses the config: %v\n%s\n%s", err, out, b)
			}
		}
	}
}

// FuzzParseCentrifugo feeds the Centrifugo scanner arbitrary input: it must not panic, and what
// it returns must lie within the input.
func FuzzParseCentrifugo(f *testing.F) {
	for _, s := range cfSamples {
		f.Add([]byte(s.in))
	}
	f.Add([]byte(`{"push":{"push":{"pub":{"data":"x"}}}}`))
	f.Add([]byte(`{"connect":{"subs":{"a":{"publications":[{},{"offset":1}]},"b":{}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m cfMsg
		if parseCf(b, &m) != nil {
			return
		}
		for _, s := range [][]byte{m.errMsg, m.subChannel, m.epoch, m.pubs, m.channel, m.reason} {
			if len(s) > len(b) {
				t.Fatalf("a field longer than the input: %q in %q", s, b)
			}
		}
		_ = eachCfPublication(m.pubs, func(p *cfMsg, raw []byte) {
			if len(raw) > len(m.pubs) {
				t.Fatalf("publication %q outside %q", raw, m.pubs)
			}
		})
	})
}
