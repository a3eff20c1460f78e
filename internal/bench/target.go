package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/procstat"
)

// targetTLS sets up TLS for an https:// or wss:// --target: the system's roots, or --ca-file's,
// or no verification with --insecure. The server name users send (SNI) and verify is the
// target's host.
func (o *Options) targetTLS(u *url.URL) error {
	secure := u.Scheme == "https" || u.Scheme == "wss"
	if !secure {
		if o.CAFile != "" || o.Insecure {
			return usageErr("--ca-file/--insecure", "apply to an https:// or wss:// --target")
		}
		return nil
	}
	cfg := &tls.Config{ServerName: u.Hostname(), InsecureSkipVerify: o.Insecure, MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return usageErr("--ca-file", "%v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return usageErr("--ca-file", "%s holds no PEM certificate", o.CAFile)
		}
	}
	o.tlsConf = cfg
	return nil
}

// tlsClient runs the TLS handshake on conn when the target wants TLS; conn is closed when it
// fails.
func (o *Options) tlsClient(ctx context.Context, conn net.Conn) (net.Conn, error) {
	if o.tlsConf == nil {
		return conn, nil
	}
	tc := tls.Client(conn, o.tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// withQuery appends the --target's query string to a request's path (and query).
func (o *Options) withQuery(path []byte) []byte {
	if o.targetQuery == "" {
		return path
	}
	sep := byte('?')
	if strings.IndexByte(string(path), '?') >= 0 {
		sep = '&'
	}
	return append(append(path, sep), o.targetQuery...)
}

// wsURL is the URL of a WebSocket handshake to host at path: wss:// when the target wants TLS,
// with the target's query string.
func (o *Options) wsURL(host, path string) string {
	scheme := "ws://"
	if o != nil && o.tlsConf != nil {
		scheme = "wss://"
	}
	if o != nil {
		path = string(o.withQuery([]byte(path)))
	}
	return scheme + host + path
}

// httpClient is a client for the bench's few requests outside the users' (probes, metrics):
// the target's TLS settings, no keep-alive.
func (o *Options) httpClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: o.tlsConf}}
}

// probeReady asks the rtlab target for GET /readyz once and wants 200.
func (o *Options) probeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	scheme := "http://"
	if o.tlsConf != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+o.targetHost+string(o.withQuery([]byte("/readyz"))), nil)
	if err != nil {
		return err
	}
	resp, err := o.httpClient(5 * time.Second).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// certProblem turns a failed certificate check into the line a user acts on; nil for other
// errors.
func certProblem(target string, err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
	)
	if errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify) {
		return usageErr("--target", "%s: its TLS certificate was not accepted (%v); give its CA with --ca-file PEM, or skip the check with --insecure", target, err)
	}
	return nil
}

// checkTargetCost checks --target-pid and --target-metrics.
func (o *Options) checkTargetCost() error {
	for _, p := range o.TargetPIDs {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return usageErr("--target-pid", "%q: want a comma list of process ids like 1234,5678", p)
		}
		if _, _, err := procstat.Read(p); err != nil {
			return usageErr("--target-pid", "process %s: %v; want a running process of this machine", p, err)
		}
	}
	if o.TargetMetrics == "" {
		return nil
	}
	u, err := url.Parse(o.TargetMetrics)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("--target-metrics", "%q: want a Prometheus endpoint's URL like http://127.0.0.1:8080/actuator/prometheus", o.TargetMetrics)
	}
	return nil
}
