package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchBadInput checks that bad input is one line naming the flag, exit status 2, and
// nothing written into --out.
func TestBenchBadInput(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"--transport", "ws,pigeon"}, "--transport"},
		{[]string{"--stages", "20s:300,30s"}, "--stages"},
		{[]string{"--stages", "abc:10"}, "--stages"},
		{[]string{"--users", "1000,lots"}, "--users"},
		{[]string{"--scenario", "gossip"}, "--scenario"},
		{[]string{"--scenario", "notify", "--room-size", "1"}, "--room-size"},
		{[]string{"--hold"}, "--hold"},
		{[]string{"--target", dead}, "--target"},
		{[]string{"--target", "ftp://x"}, "--target"},
		{[]string{"--nodes", "2"}, "--nodes"},
		{[]string{"--broker", "memory,memory"}, "--broker"},
		{[]string{"--broker", "memory,"}, "--broker"},
		{[]string{"--broker", "nats://127.0.0.1:1,nats://127.0.0.1:2"}, "--broker"},
		{[]string{"--broker", "nats://127.0.0.1:1#a,nats://127.0.0.1:2#a"}, "--broker"},
		{[]string{"--broker", "nats://127.0.0.1:1#Bad Label"}, "--broker"},
		{[]string{"--broker", "nats://127.0.0.1:1#memory"}, "--broker"},
		{[]string{"--broker", "memory#mine,nats://127.0.0.1:1"}, "--broker"},
		{[]string{"--broker", "nats://127.0.0.1:1#"}, "--broker"},
		{[]string{"--rounds", "21"}, "--rounds"},
		{[]string{"--rounds", "-1"}, "--rounds"},
		{[]string{"--target", dead, "--broker", "memory,redis://127.0.0.1:1/0"}, "--broker"},
	}
	for _, tt := range tests {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench", "--out", out}, tt.args...), &stdout, &stderr)
		msg := stderr.String()
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tt.args, code, msg)
		}
		if !strings.HasPrefix(msg, "rtlab bench: "+tt.flag+":") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line naming %s", tt.args, msg, tt.flag)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: --out was created", tt.args)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-transport", "-users", "-stages", "-scenario", "-group-size", "-groups", "-interval",
		"-target", "-seed", "-out", "-server-args", "-broker", "-nodes", "-rounds", "-room-size", "-talks", "-hold", "-auth-secret"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("help does not document %s", f)
		}
	}
}

func TestRedactSecret(t *testing.T) {
	got := strings.Join(redactSecret([]string{"--scenario", "chat", "--auth-secret", "s3cret", "-auth-secret=x", "--users", "10"}), " ")
	if want := "--scenario chat --auth-secret REDACTED -auth-secret=REDACTED --users 10"; got != want {
		t.Errorf("redactSecret = %q, want %q", got, want)
	}
	got = strings.Join(redactSecret([]string{"--broker", "memory,redis://:pw@127.0.0.1:6379/0,amqp://guest:guest@h:5672/#rmq,nats://h:4222",
		"--broker=amqp://u:p%40ss@h/", "--nodes", "2"}), " ")
	if want := "--broker memory,redis://:xxxxx@127.0.0.1:6379/0,amqp://guest:xxxxx@h:5672/#rmq,nats://h:4222 --broker=amqp://u:xxxxx@h/ --nodes 2"; got != want {
		t.Errorf("redactSecret = %q, want %q", got, want)
	}
}

// TestServeHidesBrokerPassword checks that a refused --broker is named without its password.
func TestServeHidesBrokerPassword(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--addr", "127.0.0.1:0", "--broker", "kafka://user:s3cret@127.0.0.1:1/"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "kafka://user:xxxxx@127.0.0.1:1/") || strings.Contains(stderr.String()+stdout.String(), "s3cret") {
		t.Errorf("exit %d, stderr %q: want a refusal naming the URL without its password", code, stderr.String())
	}
}
