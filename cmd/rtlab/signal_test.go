package main

import (
	"crypto/tls"
	"net/http"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
)

// servedCN is the common name of the certificate a new TLS connection to addr is given.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the name is what is checked
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestSIGHUP: SIGHUP rereads the TLS certificate (a renewed one is served to new
// connections); without TLS it is ignored; the server keeps serving either way and still
// stops gracefully on SIGTERM (exit 0).
func TestSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	servertest.WriteCert(t, certFile, keyFile, "first")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"tls", []string{"--tls-cert", certFile, "--tls-key", keyFile}},
		{"plain", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := rtlabCmd(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", ""}, tc.args...)...)
			line := servertest.StartUntil(t, cmd, `msg="rtlab serving"`, 30*time.Second)
			addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)[1]
			if tc.args != nil {
				if cn := servedCN(t, addr); cn != "first" {
					t.Fatalf("served %q, want first", cn)
				}
				servertest.WriteCert(t, certFile, keyFile, "renewed")
			}
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			if tc.args != nil {
				eventually.True(t, 10*time.Second, "the renewed certificate served after SIGHUP", func() bool { return servedCN(t, addr) == "renewed" })
			} else {
				time.Sleep(200 * time.Millisecond) // a SIGHUP that killed it would have by now
				resp, err := http.Get("http://" + addr + "/healthz")
				if err != nil {
					t.Fatalf("after SIGHUP: %v", err)
				}
				resp.Body.Close()
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("after SIGHUP then SIGTERM: %v; want exit 0", err)
			}
		})
	}
}
