package redis

import (
	"strings"
	"testing"
)

// TestSlot: the hash slots Redis's CLUSTER KEYSLOT gives (its documentation's examples and the
// CRC16 check value of "123456789", 0x31C3).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 % 16384,
		"foo":                  12182,
		"{user1000}.following": slot("user1000"),
		"rtlab:s:{chat/a}":     slot("chat/a"),
		"rtlab:c:{chat/a}":     slot("chat/a"),
		"{}x":                  slot("{}x"), // an empty tag: the whole key
		"rtlab:m:{a}b}":        slot("a"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
	if slot("{}x") == slot("") {
		t.Error("an empty hash tag must hash the whole key")
	}
}

func TestClusterURL(t *testing.T) {
	opt, err := clusterOptions("redis+cluster://u:p@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(opt.Addrs, " "); got != "127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002" || opt.Username != "u" || opt.Password != "p" {
		t.Fatalf("addrs %q user %q password %q", got, opt.Username, opt.Password)
	}
	if opt.MaxRetries != -1 || opt.MaxRedirects != -1 {
		t.Fatalf("MaxRetries %d, MaxRedirects %d: a publish must never be resent", opt.MaxRetries, opt.MaxRedirects)
	}
	for url, want := range map[string]string{
		"redis+cluster://127.0.0.1:7000,127.0.0.1:7001": "?addr=",
		"redis+cluster://127.0.0.1:7000/3":              "database 0 only",
		"redis+cluster://127.0.0.1:7000?addr=nope":      "addr",
	} {
		if _, err := NewClient(url); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewClient(%q) = %v, want an error saying %q", url, err, want)
		}
	}
	if !IsCluster("rediss+cluster://h:1") || IsCluster("redis://h:1/0") {
		t.Error("IsCluster")
	}
}
