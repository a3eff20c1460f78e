package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn, and its key.
func writeCert(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

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
	writeCert(t, certFile, keyFile, "first")
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
				writeCert(t, certFile, keyFile, "renewed")
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
