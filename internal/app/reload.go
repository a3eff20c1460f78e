package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
)

// certHolder serves the TLS certificate in force, so that SIGHUP can replace it (a renewed
// certificate) without a restart; connections already open keep theirs.
type certHolder struct {
	cur atomic.Pointer[tls.Certificate]
}

func newCertHolder(c *tls.Certificate) *certHolder {
	if c == nil {
		return nil
	}
	h := &certHolder{}
	h.cur.Store(c)
	return h
}

func (h *certHolder) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return h.cur.Load(), nil }

// ErrNoTLS is ReloadTLS's answer when the server serves plain HTTP.
var ErrNoTLS = errors.New("no --tls-cert: nothing to reload")

// ReloadTLS rereads --tls-cert and --tls-key. A pair that does not load leaves the one in
// force in place.
func (a *App) ReloadTLS() error {
	if a.cert == nil {
		return ErrNoTLS
	}
	c, err := tls.LoadX509KeyPair(a.cfg.TLSCert, a.cfg.TLSKey)
	if err != nil {
		return fmt.Errorf("reload --tls-cert/--tls-key (the previous pair stays): %w", err)
	}
	a.cert.cur.Store(&c)
	return nil
}
