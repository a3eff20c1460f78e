package report

import (
	"math"
	"strconv"
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"group small", groupDigits("999"), "999"},
		{"group thousands", groupDigits("1234"), "1,234"},
		{"group millions", groupDigits("-1234567.891"), "-1,234,567.891"},
		{"group six", groupDigits("123456"), "123,456"},
		{"int", fmtInt(12345678), "12,345,678"},
		{"ms zero", fmtMs(0), "0"},
		{"ms sub", fmtMs(0.0421), "0.042"},
		{"ms small", fmtMs(4.216), "4.22"},
		{"ms tens", fmtMs(42.16), "42.2"},
		{"ms large", fmtMs(12345.6), "12,346"},
		{"ms negative", fmtMs(-3.6), "-3.60"},
		{"ratio full", fmtRatio(1), "100"},
		{"ratio truncates", fmtRatio(0.998969), "99.89"},
		{"ratio high", fmtRatio(0.99999), "99.99"},
		{"ratio low", fmtRatio(0.5), "50.00"},
		{"bytes", fmtBytes(512), "512 B"},
		{"KiB", fmtBytes(1536), "1.50 KiB"},
		{"MiB", fmtBytes(70.9 * 1024 * 1024), "70.9 MiB"},
		{"GiB", fmtBytes(16 << 30), "16.0 GiB"},
		{"bytes negative", fmtBytes(-960 * 1024), "-960 KiB"},
		{"KiB column", fmtKiB(12 * 1024), "12.0"},
		{"rate", fmtRate(2422.4), "2,422"},
		{"rate small", fmtRate(3.333), "3.33"},
		{"cpu", fmtCPU(88), "88.0"},
		{"no negative zero", fmtFixed(-0.01, 1), "0.0"},
		{"signed", signed("3.2"), "+3.2"},
		{"signed negative", signed("-3.2"), "-3.2"},
		{"signed zero", signed("0.0"), "0.0"},
		{"users", fmtUsers(1000), "1,000 users"},
		{"names", joinNames([]string{"a", "b", "c"}), "a, b and c"},
		{"label known", transportLabel("ws"), "WebSocket"},
		{"label variant", transportLabel("longpoll-5s"), "long polling 5s"},
		{"label unknown", transportLabel("grpc"), "grpc"},
		{"label sockjs", transportLabel("sockjs@redis"), "SockJS · Redis"},
		{"label stomp-tcp", transportLabel("stomp-tcp"), "STOMP over TCP"},
		{"rank sockjs", strconv.Itoa(transportRank("sockjs")), "6"},
		{"rank stomp-tcp", strconv.Itoa(transportRank("stomp-tcp@redis")), "5"},
		{"color known", palette([]string{"ws"})["ws"], "#1f78b4"},
		{"color variant", palette([]string{"longpoll-1s", "longpoll-5s"})["longpoll-5s"], "#66a61e"},
		{"color unknown", palette([]string{"grpc", "ws"})["grpc"], "#66a61e"},
		{"color sockjs", palette([]string{"sse", "sockjs"})["sockjs"], "#b15928"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestJSNum(t *testing.T) {
	for v, want := range map[float64]string{math.NaN(): "null", math.Inf(1): "null", 1.5: "1.5", 12345678: "1.23457e+07"} {
		b, err := jsNum(v).MarshalJSON()
		if err != nil || string(b) != want {
			t.Errorf("jsNum(%v) = %s, %v; want %s", v, b, err, want)
		}
	}
}
