package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
)

// The servers a run starts (package peers) with the run's settings, and the probes that tell
// a --target's kind (they speak the lab's own wire clients).

// startCentrifugo starts a Centrifugo node with the run's settings on broker (memory, or a
// Redis URL).
func (o *Options) startCentrifugo(ctx context.Context, broker string, logw io.Writer) (*peers.Server, error) {
	bin, err := o.centrifugoBinary()
	if err != nil {
		return nil, err
	}
	size, ttl := rtlabHistory(o.ServerArgs)
	return peers.StartCentrifugo(ctx, bin, peers.CentrifugoSettings{
		Engine: brokerURL(broker), HistorySize: size, HistoryTTL: ttl,
		Secret: string(o.cfSecret), Insecure: o.AuthSecret == "", APIKey: o.cfKey,
	}, logw)
}

// centrifugoBinary finds the centrifugo executable (peers.CentrifugoBinary).
func (o *Options) centrifugoBinary() (string, error) {
	bin, err := peers.CentrifugoBinary(o.CentrifugoBin, o.peerCache())
	return bin, flagErr(err)
}

// springJar returns the Spring peer's jar (peers.SpringJar); status hears about a build.
func (o *Options) springJar(ctx context.Context, status io.Writer) (string, error) {
	jar, err := peers.SpringJar(ctx, o.SpringJar, o.peerCache(), status)
	return jar, flagErr(err)
}

// startSpring starts the Spring peer; extra are its own arguments (--lab.receipts=false).
func (o *Options) startSpring(ctx context.Context, logw io.Writer, extra ...string) (*peers.Server, error) {
	jar, err := o.springJar(ctx, o.statusW())
	if err != nil {
		return nil, err
	}
	s, err := peers.StartSpring(ctx, jar, logw, extra...)
	return s, flagErr(err)
}

// startRabbit starts a private RabbitMQ node, ready once a STOMP session over Web-STOMP is
// CONNECTED.
func startRabbit(ctx context.Context, logw io.Writer) (*peers.Server, error) {
	s, err := peers.StartRabbit(ctx, logw, func(ctx context.Context, addr string) error {
		return probeSTOMP(ctx, nil, addr, stompDialectFor(results.KindRabbitMQ, nil))
	})
	return s, flagErr(err)
}

// rabbitBinaries finds RabbitMQ (peers.RabbitBinaries).
func rabbitBinaries() (script, epmd, version string, err error) {
	script, epmd, version, err = peers.RabbitBinaries()
	return script, epmd, version, flagErr(err)
}

// flagErr turns a server that cannot start as the flags say into a *UsageError naming the flag.
func flagErr(err error) error {
	var se *peers.SetupError
	if errors.As(err, &se) {
		return &UsageError{Flag: se.Flag, Msg: se.Msg}
	}
	return err
}

// peerCache is where built and installed peers are kept.
func (o *Options) peerCache() string {
	if o.PeerCache != "" {
		return o.PeerCache
	}
	return Defaults(o.Scenario).PeerCache
}

// serverBinary returns the executable to spawn.
func (o *Options) serverBinary() (string, error) {
	if o.ServerBinary != "" {
		return o.ServerBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the rtlab executable to start the server: %w", err)
	}
	return exe, nil
}

// rtlabHistory returns the history size and TTL the rtlab servers of the run keep: rtlab's
// defaults, or what --server-args sets. Centrifugo gets the same.
func rtlabHistory(args []string) (size int, ttl time.Duration) {
	size, ttl = 100, 10*time.Minute
	for i := 0; i < len(args); i++ {
		name, val, ok := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !ok && i+1 < len(args) && (name == "history-size" || name == "history-ttl") {
			val = args[i+1]
			i++
		}
		switch name {
		case "history-size":
			if n, err := strconv.Atoi(val); err == nil && n > 0 {
				size = n
			}
		case "history-ttl":
			if d, err := time.ParseDuration(val); err == nil && d > 0 {
				ttl = d
			}
		}
	}
	return size, ttl
}

// probeCentrifugo connects to a Centrifugo target over its WebSocket protocol and waits for
// the connect reply.
func probeCentrifugo(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, br, _, err := ws.Dialer{Timeout: 3 * time.Second, TLSConfig: o.tlsConf}.Dial(ctx, o.wsURL(o.targetHost, "/connection/websocket"))
	if err != nil {
		return err
	}
	defer conn.Close()
	s := &wsStream{conn: conn, br: bufio.NewReaderSize(conn, streamBufSize)}
	if br != nil {
		ws.PutReader(br)
		return fmt.Errorf("websocket: unexpected data after the handshake")
	}
	token := ""
	if len(o.cfSecret) > 0 {
		token = cfToken(o.cfSecret, "rtlab-bench-probe", nil, time.Now().Add(time.Minute).Unix())
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write(appendClientFrame(nil, ws.OpText, appendCfConnect(nil, token))); err != nil {
		return err
	}
	p, err := s.next(func([]byte) error { return nil })
	if err != nil {
		return err
	}
	var m cfMsg
	if err := parseCf(p, &m); err != nil {
		return fmt.Errorf("connect reply %.80q: %w", p, err)
	}
	if m.err {
		return fmt.Errorf("connect refused: %d %s", m.errCode, m.errMsg)
	}
	if !m.connect {
		return fmt.Errorf("connect reply %.80q", p)
	}
	return nil
}

// probeSTOMP opens a STOMP session over WebSocket at addr as d says and waits for CONNECTED;
// o, when not nil, is a target's (its TLS and query).
func probeSTOMP(ctx context.Context, o *Options, addr string, d stompDialect) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var tlsConf *tls.Config
	if o != nil {
		tlsConf = o.tlsConf
	}
	conn, br, hs, err := ws.Dialer{Protocols: []string{"v12.stomp"}, Timeout: 3 * time.Second, TLSConfig: tlsConf}.Dial(ctx, o.wsURL(addr, d.path))
	if err != nil {
		return err
	}
	defer conn.Close()
	if br != nil {
		ws.PutReader(br)
		// The server wrote before we did: not a STOMP server waiting for CONNECT.
		return fmt.Errorf("websocket: unexpected data after the handshake")
	}
	if hs.Protocol != "v12.stomp" {
		return fmt.Errorf("websocket: server chose subprotocol %q, want v12.stomp", hs.Protocol)
	}
	f := "CONNECT\naccept-version:1.2\nhost:" + nonEmptyStr(d.host, addr) + "\n"
	if d.login != "" {
		f += "login:" + d.login + "\npasscode:" + d.passcode + "\n"
	}
	f += "\n\x00"
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write(appendClientFrame(nil, ws.OpText, []byte(f))); err != nil {
		return err
	}
	s := &wsStream{conn: conn}
	s.br = bufio.NewReaderSize(conn, streamBufSize)
	p, err := s.next(func([]byte) error { return nil })
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(p), "CONNECTED") {
		line, _, _ := strings.Cut(string(p), "\n")
		return fmt.Errorf("STOMP: %s instead of CONNECTED", line)
	}
	return nil
}

// nonEmptyStr returns s, or otherwise when s is empty.
func nonEmptyStr(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
