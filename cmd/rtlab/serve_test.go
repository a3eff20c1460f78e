package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// TestMain lets tests start this binary as rtlab itself (RTLAB_TEST_MAIN=1), a real second
// process for what only another process can show: who holds a data directory, what reaches
// the process's own stderr.
func TestMain(m *testing.M) {
	if os.Getenv("RTLAB_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// rtlabCmd is this test binary acting as `rtlab args...`.
func rtlabCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RTLAB_TEST_MAIN=1")
	cmd.Dir = t.TempDir()
	return cmd
}

// TestServeBadFlags checks the exact line each bad value gets: the flag, the value as given,
// what is expected; exit 2, and no usage text.
func TestServeBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "8081"}, `--addr "8081": want host:port, such as 127.0.0.1:8080 or :8080`},
		{[]string{"--addr", "127.0.0.1:99999"}, `--addr "127.0.0.1:99999": want host:port, such as 127.0.0.1:8080 or :8080`},
		{[]string{"--admin-addr", "localhost"}, `--admin-addr "localhost": want host:port, such as 127.0.0.1:8080 or :8080, or empty`},
		{[]string{"--history-ttl", "5x"}, `--history-ttl "5x": want a duration such as 500ms, 30s, 10m or 1h, not negative (0: the default)`},
		{[]string{"--write-timeout=-3s"}, `--write-timeout "-3s": want a duration such as 500ms, 30s, 10m or 1h, not negative (0: the default)`},
		{[]string{"--seed-sse-timeout", "soon"}, `--seed-sse-timeout "soon": want a duration such as 500ms, 30s, 10m or 1h`},
		{[]string{"--max-frame", "-5"}, `--max-frame "-5": want a whole number, at least 1`},
		{[]string{"--max-frame", "0"}, `--max-frame "0": want a whole number, at least 1`},
		{[]string{"--queue-bytes", "1MiB"}, `--queue-bytes "1MiB": want a whole number, at least 1`},
		{[]string{"--history-size", "2000000"}, `--history-size "2000000": want a whole number from 1 to 1000000`},
		{[]string{"--max-conns", "-2"}, `--max-conns "-2": want -1 (unlimited) or a whole number, at least 1`},
		{[]string{"--msg-rate", "0"}, `--msg-rate "0": want -1 (unlimited) or a number per second above 0`},
		{[]string{"--msg-burst", "-1"}, `--msg-burst "-1": want a whole number, at least 0`},
		{[]string{"--presence=maybe"}, `--presence "maybe": want true or false`},
		{[]string{"--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, `--trusted-proxies "10.0.0.0/33": want comma-separated CIDRs (10.0.0.0/8) or addresses (127.0.0.1)`},
		{[]string{"--ping-interval", "1ns"}, `--ping-interval "1ns": want a duration of at least 100ms, such as 1s or 30s (0: the default)`},
		{[]string{"--sse-heartbeat", "99ms"}, `--sse-heartbeat "99ms": want a duration of at least 100ms, such as 1s or 30s (0: the default)`},
		{[]string{"--stomp-heartbeat", "1us"}, `--stomp-heartbeat "1us": want a duration of at least 100ms, such as 1s or 30s (0: the default)`},
		{[]string{"--auth-secret", ""}, `--auth-secret "": want a value; empty would start open dev mode (no auth): to run without auth, leave the setting out`},
		{[]string{"--auth-jwks="}, `--auth-jwks "": want a value; empty would start open dev mode (no auth): to run without auth, leave the setting out`},
		{[]string{"--auth-public-key", ""}, `--auth-public-key "": want a value; empty would start open dev mode (no auth): to run without auth, leave the setting out`},
		{[]string{"--sockjs-path", "/"}, `--sockjs-path "/": want empty (off), or a path such as /ws (not /)`},
		{[]string{"--sockjs-path", "ws"}, `--sockjs-path "ws": want empty (off), or a path such as /ws (not /)`},
		{[]string{"--sockjs-path", "/a{b}"}, `--sockjs-path "/a{b}": want empty (off), or a path such as /ws (not /)`},
		{[]string{"--app-proxy", "http://127.0.0.1:9/app"}, `--app-proxy needs --app-proxy-secret (or RTLAB_APP_PROXY_SECRET), the key the backend checks rtlab's requests with`},
		{[]string{"--addr"}, `--addr needs a value: want host:port, such as 127.0.0.1:8080 or :8080`},
		{[]string{"--no-such-flag"}, `unknown flag --no-such-flag (rtlab serve -h lists the flags)`},
		{[]string{"stray"}, `unexpected argument "stray"; all settings are flags (rtlab serve -h)`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"serve", "--data-dir", ""}, tt.args...), &stdout, &stderr)
		if want := "rtlab serve: " + tt.want + "\n"; code != 2 || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and %q", tt.args, code, stderr.String(), stdout.String(), want)
		}
	}
}

// TestServeHelp checks that -h lists the flags on stdout (every numeric flag has a rule, or
// parse panics) and exits 0.
func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-max-frame") || stderr.Len() != 0 || strings.Contains(stdout.String(), "panic") {
		t.Errorf("serve -h: exit %d, stdout %q, stderr %q; want exit 0 and the flags on stdout", code, stdout.String(), stderr.String())
	}
}

// startServe starts rtlab serve in a process of its own on a free port with args, and returns
// it once it logs that it serves.
func startServe(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := rtlabCmd(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	servertest.StartUntil(t, cmd, `msg="rtlab serving"`, 30*time.Second)
	t.Cleanup(func() { servertest.Interrupt(cmd) })
	return cmd
}

// TestServeDataDirBusy starts a server, then a second on the same --data-dir, which must name
// the first one's process instead of bbolt's "timeout".
func TestServeDataDirBusy(t *testing.T) {
	dir := t.TempDir()
	first := startServe(t, dir, "--data-dir", "data")
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}, &stdout, &stderr)
	data := filepath.Join(dir, "data")
	want := regexp.MustCompile(fmt.Sprintf(`^rtlab serve: --data-dir %s: %s is in use by another process, pid %d \(\S+ serve --addr 127\.0\.0\.1:0 --data-dir data\); stop it, or give this server another --data-dir\n$`,
		regexp.QuoteMeta(data), regexp.QuoteMeta(filepath.Join(data, "rtlab.db")), first.Process.Pid))
	if code != 2 || !want.MatchString(stderr.String()) {
		t.Errorf("exit %d, stderr %q; want exit 2 and a line matching %s", code, stderr.String(), want)
	}
}

// TestServeRedisUnreachable checks that an unreachable Redis gets one line, the server's, and
// no line of the client library before it.
func TestServeRedisUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cmd := rtlabCmd(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", "", "--broker", "redis://"+dead+"/0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	want := regexp.MustCompile(`^rtlab serve: --broker: redis broker: connect to ` + regexp.QuoteMeta(dead) + `: .*connection refused\n$`)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !want.MatchString(stderr.String()) {
		t.Errorf("err %v, stderr %q; want exit 2 and one line matching %s", err, stderr.String(), want)
	}
}

// TestServeEnv: every flag also reads RTLAB_<NAME>; a bad value there gets the same one line,
// naming the variable; the command line wins over the environment.
func TestServeEnv(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"RTLAB_MAX_FRAME", "-5", `$RTLAB_MAX_FRAME "-5": want a whole number, at least 1`},
		{"RTLAB_QUEUE_BYTES", "1MiB", `$RTLAB_QUEUE_BYTES "1MiB": want a whole number, at least 1`},
		{"RTLAB_LOG_LEVEL", "loud", `$RTLAB_LOG_LEVEL "loud": want debug, info, warn or error`},
		{"RTLAB_DEV", "maybe", `$RTLAB_DEV "maybe": want true or false`},
		{"RTLAB_AUTH_SECRET", "", `$RTLAB_AUTH_SECRET "": want a value; empty would start open dev mode (no auth): to run without auth, leave the setting out`},
		{"RTLAB_PING_INTERVAL", "1ns", `$RTLAB_PING_INTERVAL "1ns": want a duration of at least 100ms, such as 1s or 30s (0: the default)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			var stdout, stderr bytes.Buffer
			code := run([]string{"serve", "--data-dir", ""}, &stdout, &stderr)
			if want := "rtlab serve: " + tc.want + "\n"; code != 2 || stderr.String() != want {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), want)
			}
		})
	}
	cmd := rtlabCmd(t, "serve", "--addr", "127.0.0.1:0", "--max-frame", "2048")
	cmd.Env = append(cmd.Env, "RTLAB_DATA_DIR=", "RTLAB_HISTORY_SIZE=7", "RTLAB_MAX_FRAME=-5", "RTLAB_TRUSTED_PROXIES=10.0.0.0/8")
	line := servertest.StartUntil(t, cmd, `msg="rtlab serving"`, 30*time.Second)
	t.Cleanup(func() { servertest.Interrupt(cmd) })
	for _, want := range []string{"history_size=7", "max_frame=2048", `durable="off (all history in memory)"`} {
		if !strings.Contains(line, want) {
			t.Errorf("start line %q: want %s", line, want)
		}
	}
}

// TestVersion: `rtlab version` prints a semantic version with the build as metadata, and
// CHANGELOG.md has a section for its release.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("rtlab version: exit %d", code)
	}
	m := regexp.MustCompile(`^rtlab (\d+\.\d+\.\d+)\+\S+\n$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("rtlab version printed %q; want rtlab X.Y.Z+build", stdout.String())
	}
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil || !strings.Contains(string(log), "\n## "+m[1]+"\n") {
		t.Errorf("CHANGELOG.md has no section ## %s (%v)", m[1], err)
	}
}
