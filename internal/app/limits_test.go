package app

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestLocationGroupsBounded: GET /cur/{group} for more groups than --location-groups drops
// the group asked about least recently.
func TestLocationGroupsBounded(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Location.Groups = 5 })
	for i := 0; i < 20; i++ {
		if st := s.get(t, fmt.Sprintf("/cur/g%d", i), nil); st != http.StatusOK {
			t.Fatalf("GET /cur/g%d: %d", i, st)
		}
	}
	if n := s.app.locations.GroupCount(); n != 5 {
		t.Fatalf("%d groups tracked, want 5", n)
	}
}

// TestOperatorEndpointsLoopbackOnly: with auth on and no --admin-addr, /metrics and /lab answer
// only clients on loopback.
func TestOperatorEndpointsLoopbackOnly(t *testing.T) {
	a, err := New(Config{Auth: AuthConfig{Secret: "0123456789abcdef0123"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote, path string
		want         int
	}{
		{"127.0.0.1:4000", "/metrics", http.StatusOK},
		{"[::1]:4000", "/lab", http.StatusOK},
		{"203.0.113.7:4000", "/metrics", http.StatusForbidden},
		{"203.0.113.7:4000", "/lab/", http.StatusForbidden},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		r.RemoteAddr = tc.remote
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("GET %s from %s: %d, want %d (%s)", tc.path, tc.remote, w.Code, tc.want, w.Body)
		}
	}
}

// TestUnknownRoute: a path no route serves gets 404 with a reason.
func TestUnknownRoute(t *testing.T) {
	s := startServer(t, nil)
	code, body := do(t, s, "GET", "/no/such/route", "", "")
	var e struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != 404 || e.Error != "not_found" || e.Reason == "" {
		t.Fatalf("GET /no/such/route: %d %s", code, body)
	}
}

// TestTLS: with --tls-cert and --tls-key the server speaks HTTPS and wss://, and STOMP over
// TLS on --stomp-addr.
func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	if _, err := New(Config{TLSCert: certFile}); err == nil {
		t.Fatal("--tls-cert without --tls-key accepted")
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stompAddr := free.Addr().String()
	free.Close()
	a, err := New(Config{TLSCert: certFile, TLSKey: keyFile, STOMPAddr: stompAddr})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "https://" + ln.Addr().String()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	eventually.True(t, 10*time.Second, "HTTPS /readyz answers 200", func() bool {
		res, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	c := tt.Dialer{TLS: &tls.Config{RootCAs: pool}}.WS(t, "wss://"+ln.Addr().String()+"/api/ws")
	if m := c.Op("connected"); m.Op != "connected" {
		t.Fatalf("over wss: %+v", m)
	}
	sc, err := tls.Dial("tcp", stompAddr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("STOMP over TLS: %v", err)
	}
	defer sc.Close()
	_ = sc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := sc.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\x00")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(sc).ReadString(0); err != nil || !strings.HasPrefix(got, "CONNECTED\n") {
		t.Fatalf("STOMP over TLS answered %q (%v)", got, err)
	}
	if res, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns their files and a
// pool that trusts the certificate.
func selfSigned(t *testing.T) (string, string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	pool.AddCert(servertest.WriteCert(t, certFile, keyFile, "rtlab test"))
	return certFile, keyFile, pool
}
