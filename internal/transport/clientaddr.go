package transport

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies whose X-Forwarded-For is believed (--trusted-proxies).
// Empty: no proxy is, and a request's client is always the peer of its TCP connection.
type Proxies []netip.Prefix

// ParseProxies reads a comma-separated list of CIDRs (10.0.0.0/8, ::1/128) or single
// addresses (127.0.0.1).
func ParseProxies(list string) (Proxies, error) {
	var p Proxies
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q: want a CIDR (10.0.0.0/8) or an address", s)
			}
			p = append(p, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pre, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR (10.0.0.0/8) or an address", s)
		}
		p = append(p, pre.Masked())
	}
	return p, nil
}

func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pre := range p {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address a request came from: the peer of its TCP connection, unless that
// peer is a trusted proxy. Then X-Forwarded-For is read from the right (each proxy appends the
// address it was connected from), trusted proxies' entries are skipped, and the first other
// address is the client's; entries further left are what the client itself claimed and are
// never believed. A trusted peer that forwarded nothing is the client. The zero Addr means
// the peer's address could not be read (not a TCP connection).
func (p Proxies) ClientAddr(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !peer.IsValid() || !p.trusts(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			break // a malformed entry ends what can be believed: the last proxy is the client
		}
		client = a.Unmap()
		if !p.trusts(client) {
			break
		}
	}
	return client
}

// remoteAddr is the peer of r's connection.
func remoteAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// LocalDirect reports whether r came straight from this machine: its peer is a loopback
// address and it carries no forwarding header, so no proxy relayed it from elsewhere. The
// headers are those proxies and CDNs add to say whom they relay.
func LocalDirect(r *http.Request) bool {
	if !remoteAddr(r).IsLoopback() {
		return false
	}
	for h := range r.Header { // canonical keys, as net/http reads them; a request has few
		if forwardingHeaders[h] {
			return false
		}
	}
	return true
}

// forwardingHeaders name a client behind a proxy (canonical keys): a request carrying one did
// not come straight from this machine.
var forwardingHeaders = map[string]bool{"X-Forwarded-For": true, "Forwarded": true, "X-Real-Ip": true,
	"X-Client-Ip": true, "True-Client-Ip": true, "Cf-Connecting-Ip": true, "Fastly-Client-Ip": true,
	"X-Cluster-Client-Ip": true, "X-Original-Forwarded-For": true, "X-Forwarded": true, "Forwarded-For": true, "Via": true}

// clientIP is ClientAddr as the key of the per-address limits.
func (s *Server) clientIP(r *http.Request) string {
	if a := s.proxies.ClientAddr(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}
