package brokertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/rtlab/rtlab/internal/eventually"
)

// Server is a broker server process started by a test: Redis, NATS or RabbitMQ on free loopback
// ports with its data in the test's temporary directory. Stop and Start restart it with the same
// ports and data directory, so clients can reconnect to the same URL.
type Server struct {
	Name string // "redis", "nats" or "rabbitmq"
	URL  string // what a broker's New takes, e.g. redis://127.0.0.1:40001/0
	Addr string // host:port clients dial
	// Durable is true when the server keeps its data over Stop and Start (NATS and RabbitMQ
	// store it in their data directory; Redis runs without persistence).
	Durable bool

	tb      testing.TB
	startUp time.Duration  // how long a start may take
	stopSig syscall.Signal // what Stop sends first; zero means SIGTERM
	ready   func() error   // after the port accepts: nil once the server serves; may be nil
	argv    []string
	env     []string
	dir     string // working directory and data

	out *lockedWriter // the process's output, kept across restarts

	mu     sync.Mutex
	cmd    *exec.Cmd     // running process; nil when stopped; guarded by mu
	waited chan struct{} // closed when cmd exits; guarded by mu
	extra  []*exec.Cmd   // helper processes (epmd) stopped at cleanup

	members []*Server // a group's servers (StartRedisShards), which its methods act on together
}

// StartRedis starts redis-server with persistence off: a restart loses every key, which is what
// the suite expects of Redis (a new epoch after the restart). It skips the test when
// redis-server is not installed.
func StartRedis(tb testing.TB) *Server {
	tb.Helper()
	bin := lookPath(tb, "redis-server", "apt-get install redis-server")
	s, port := newServer(tb, "redis", 10*time.Second)
	s.argv = []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", s.dir, "--protected-mode", "no", "--daemonize", "no"}
	s.URL = "redis://" + s.Addr + "/0"
	return s.launch()
}

// StartRedisCluster starts a Redis Cluster of three masters (no replicas), each a
// redis-server as StartRedis starts one with cluster mode on and its cluster configuration in
// its directory, joined by redis-cli --cluster create. It is one Server whose URL is the
// cluster's (redis+cluster://…) and whose Stop, Start, Hang and Wake act on every master;
// Members returns them, to restart one alone (it rejoins with the same port and configuration).
// Start waits for cluster_state:ok. It skips the test when redis-server or redis-cli is missing.
func StartRedisCluster(tb testing.TB) *Server {
	tb.Helper()
	bin := lookPath(tb, "redis-server", "apt-get install redis-server")
	cli := lookPath(tb, "redis-cli", "apt-get install redis-tools")
	var members []*Server
	for range 3 {
		s, port := newServer(tb, "redis", 10*time.Second)
		// A long node timeout: a master away for a restart is never marked failed, which would
		// take it twice the timeout to clear; without full coverage the others serve meanwhile.
		s.argv = []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", s.dir, "--protected-mode", "no", "--daemonize", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "60000", "--cluster-require-full-coverage", "no"}
		s.URL = "redis://" + s.Addr + "/0"
		members = append(members, s.launch())
	}
	args := []string{"--cluster", "create"}
	for _, m := range members {
		args = append(args, m.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("brokertest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	g := group(members, []string{"redis+cluster://" + members[0].Addr + "?addr=" + members[1].Addr + "&addr=" + members[2].Addr})
	g.ready = func() error {
		for _, m := range members {
			if err := clusterOK(m.Addr); err != nil {
				return err
			}
		}
		return nil
	}
	g.startUp = 30 * time.Second
	g.waitReady()
	return g
}

// clusterOK returns nil once the cluster node at addr reports cluster_state:ok.
func clusterOK(addr string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer c.Close()
	info, err := c.ClusterInfo(context.Background()).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("%s: not cluster_state:ok", addr)
	}
	return nil
}

// StartRedisShards starts n independent redis-servers as StartRedis does, as one Server whose
// URL lists theirs, space-separated (what --broker takes for topics sharded over servers), and
// whose Stop, Start, Hang and Wake act on all of them.
func StartRedisShards(tb testing.TB, n int) *Server { return StartShards(tb, n, StartRedis) }

// StartShards is StartRedisShards for any kind of server start starts.
func StartShards(tb testing.TB, n int, start func(testing.TB) *Server) *Server {
	tb.Helper()
	var members []*Server
	urls := make([]string, n)
	for i := range n {
		m := start(tb)
		members = append(members, m)
		urls[i] = m.URL
	}
	return group(members, urls)
}

// RabbitVhostShards is a Server whose URL lists n vhosts of one RabbitMQ (started by
// StartRabbitVhosts with at least n), space-separated: topics sharded over vhosts, each with a
// sequencer of its own.
func RabbitVhostShards(s *Server, n int) *Server {
	urls := make([]string, n)
	for i := range n {
		urls[i] = s.VhostURL(i + 1)
	}
	return group([]*Server{s}, urls)
}

func group(members []*Server, urls []string) *Server {
	return &Server{Name: members[0].Name, tb: members[0].tb, Durable: members[0].Durable, members: members,
		Addr: members[0].Addr, URL: strings.Join(urls, " ")}
}

// Members returns the servers of a group made by StartRedisShards, nil for a single server.
func (s *Server) Members() []*Server { return s.members }

// StartRedisAOF starts redis-server with an append-only file fsynced on every write, as
// docs/brokers.md advises for durable topics: a restart keeps every key.
func StartRedisAOF(tb testing.TB) *Server {
	tb.Helper()
	bin := lookPath(tb, "redis-server", "apt-get install redis-server")
	s, port := newServer(tb, "redis", 10*time.Second)
	s.Durable = true
	s.argv = []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir, "--protected-mode", "no", "--daemonize", "no"}
	s.URL = "redis://" + s.Addr + "/0"
	return s.launch()
}

// StartNATS starts nats-server with JetStream storing in a temporary directory that survives
// Stop and Start. It skips the test when nats-server is not installed.
func StartNATS(tb testing.TB) *Server {
	tb.Helper()
	bin := lookPath(tb, "nats-server", "apt-get install nats-server")
	s, port := newServer(tb, "nats", 15*time.Second)
	s.Durable = true
	s.argv = []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(s.dir, "js")}
	s.URL = "nats://" + s.Addr
	// The port opens before JetStream is up: a stream created then can time out. It is ready
	// once JetStream answers.
	s.ready = func() error {
		nc, err := nats.Connect(s.URL, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return notYet("nats: %v", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return notYet("jetstream: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := js.AccountInfo(ctx); err != nil {
			return notYet("jetstream: %v", err)
		}
		return nil
	}
	return s.launch()
}

// StartRabbit starts a private RabbitMQ node (own node name, epmd, distribution port, Mnesia and
// log directories) with no plugins. Starting takes about 5–8 s. It skips the test when
// rabbitmq-server is not installed.
func StartRabbit(tb testing.TB) *Server {
	tb.Helper()
	return StartRabbitVhosts(tb, 0)
}

// StartRabbitVhosts is StartRabbit with vhosts more, named v1..vN, each a fresh, empty broker
// for the guest user (VhostURL names them): a test that needs many fresh brokers pays for one
// boot. They are created at boot from a definitions file.
func StartRabbitVhosts(tb testing.TB, vhosts int) *Server {
	tb.Helper()
	bin := "/usr/lib/rabbitmq/bin/rabbitmq-server" // the Debian wrapper in /usr/sbin would su to the rabbitmq user
	if _, err := os.Stat(bin); err != nil {
		bin = lookPath(tb, "rabbitmq-server", "apt-get install rabbitmq-server")
	}
	epmd := lookPath(tb, "epmd", "apt-get install erlang-base (comes with rabbitmq-server)")
	s, port := newServer(tb, "rabbitmq", 60*time.Second)
	s.Durable = true
	dist, epmdPort := freePort(tb), freePort(tb)
	dir := s.dir
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	if vhosts > 0 {
		writeRabbitDefinitions(tb, dir, vhosts)
	}
	s.argv = []string{bin}
	s.env = []string{
		"HOME=" + dir,
		"RABBITMQ_NODENAME=rtlabtest" + strconv.Itoa(port) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort),
	}
	s.URL = "amqp://guest:guest@" + s.Addr + "/"
	// The listener opens before the node is fully booted: it is ready once it takes a client.
	s.ready = func() error {
		c, err := amqp091.Dial(s.URL)
		if err != nil {
			return err
		}
		return c.Close()
	}
	// A private epmd, so the node registers its name without touching a system-wide one and the
	// test can stop it afterwards.
	e := exec.Command(epmd, "-port", strconv.Itoa(epmdPort))
	e.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.Start(); err != nil {
		tb.Fatalf("brokertest: start epmd: %v", err)
	}
	s.extra = append(s.extra, e)
	waitPort(tb, net.JoinHostPort("127.0.0.1", strconv.Itoa(epmdPort)), 5*time.Second, nil)
	return s.launch()
}

// VhostURL is the URL of s's vhost vN (see StartRabbitVhosts).
func (s *Server) VhostURL(n int) string { return s.URL + "v" + strconv.Itoa(n) }

// writeRabbitDefinitions writes dir/rabbitmq.conf loading definitions with the guest user, the
// default vhost and v1..vN, guest allowed everything on each.
func writeRabbitDefinitions(tb testing.TB, dir string, vhosts int) {
	salt := []byte{1, 2, 3, 4}
	sum := sha256.Sum256(append(append([]byte{}, salt...), "guest"...))
	type perm struct {
		User      string `json:"user"`
		Vhost     string `json:"vhost"`
		Configure string `json:"configure"`
		Write     string `json:"write"`
		Read      string `json:"read"`
	}
	type vhost struct {
		Name string `json:"name"`
	}
	defs := struct {
		Users  []map[string]any `json:"users"`
		Vhosts []vhost          `json:"vhosts"`
		Perms  []perm           `json:"permissions"`
	}{Users: []map[string]any{{"name": "guest", "tags": []string{"administrator"},
		"password_hash":     base64.StdEncoding.EncodeToString(append(salt, sum[:]...)),
		"hashing_algorithm": "rabbit_password_hashing_sha256"}}}
	for i := 0; i <= vhosts; i++ {
		name := "/"
		if i > 0 {
			name = "v" + strconv.Itoa(i)
		}
		defs.Vhosts = append(defs.Vhosts, vhost{name})
		defs.Perms = append(defs.Perms, perm{"guest", name, ".*", ".*", ".*"})
	}
	b, err := json.Marshal(defs)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "definitions.json"), b, 0o644)
	}
	if err == nil {
		conf := "definitions.import_backend = local_filesystem\ndefinitions.local.path = " + filepath.Join(dir, "definitions.json") + "\n"
		err = os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(conf), 0o644)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// newServer returns a Server named name, not started, on a free loopback port (returned too)
// with its own data directory.
func newServer(tb testing.TB, name string, startUp time.Duration) (*Server, int) {
	port := freePort(tb)
	return &Server{
		Name: name, tb: tb, dir: tb.TempDir(), startUp: startUp,
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
	}, port
}

// launch starts s, and stops it and its helper processes when the test ends (also when it
// fails to start).
func (s *Server) launch() *Server {
	s.tb.Helper()
	s.tb.Cleanup(func() {
		s.Stop()
		for _, c := range s.extra {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	})
	s.Start()
	return s
}

// Start starts the server process and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	if s.members != nil {
		for _, m := range s.members {
			m.Start()
		}
		s.waitReady()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	// A process that exits while starting is started again, twice at most: a port it was
	// given can be taken for a moment by another test's process on a busy machine.
	for try := 1; ; try++ {
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), s.env...)
		if s.out == nil {
			s.out = &lockedWriter{w: new(bytes.Buffer)}
		}
		cmd.Stdout = s.out
		cmd.Stderr = s.out
		// Own process group: RabbitMQ's script starts the Erlang VM as a child, and Stop must end both.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			s.tb.Fatalf("brokertest: start %s: %v", s.Name, err)
		}
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		s.cmd, s.waited = cmd, waited
		died, err := waitUp(s.Addr, s.startUp, waited)
		if err == nil {
			break
		}
		if !died || try == 3 {
			s.tb.Fatalf("brokertest: %s %v; its output:\n%s", s.Name, err, s.out.w.String())
		}
		s.tb.Logf("brokertest: %s %v; starting it again", s.Name, err)
		time.Sleep(time.Second)
	}
	s.waitReady()
}

// waitReady waits for s.ready, if any, to pass.
func (s *Server) waitReady() {
	s.tb.Helper()
	if s.ready == nil {
		return
	}
	var err error
	if !eventually.Within(s.startUp, func() bool { err = s.ready(); return err == nil }) {
		out := ""
		if s.out != nil {
			out = s.out.w.String()
		}
		s.tb.Fatalf("brokertest: %s not ready after %v: %v\n%s", s.Name, s.startUp, err, out)
	}
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 30 s) and waits for it to exit.
func (s *Server) Stop() {
	if s.members != nil {
		for _, m := range s.members {
			m.Stop()
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	sig := s.stopSig
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(-pgid, sig)
	_ = syscall.Kill(-pgid, syscall.SIGCONT) // a server left hung (Hang) takes SIGTERM only once it runs
	select {
	case <-s.waited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.waited
	}
	// The Erlang VM may outlive its start script for a moment; make sure the group is gone.
	eventually.Within(5*time.Second, func() bool { return syscall.Kill(-pgid, 0) != nil })
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.cmd = nil
}

// Hang stops the server's processes (SIGSTOP) without closing anything: its sockets stay open
// and silent, as with a server stuck in a long pause or a network that drops every packet.
// Clients notice only by their heartbeats. Wake resumes it.
func (s *Server) Hang() {
	s.signal(syscall.SIGSTOP)
}

// Wake resumes a server stopped by Hang (SIGCONT).
func (s *Server) Wake() {
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	if s.members != nil {
		for _, m := range s.members {
			m.signal(sig)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		s.tb.Fatalf("brokertest: signal %s %v: %v", s.Name, sig, err)
	}
}

func lookPath(tb testing.TB, name, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return filepath.Join(dir, name)
			}
		}
		if os.Getenv("RTLAB_REQUIRE_BROKERS") != "" {
			tb.Fatalf("brokertest: %s not installed (%s), and RTLAB_REQUIRE_BROKERS is set", name, hint)
		}
		tb.Skipf("brokertest: %s not installed (%s); skipping the %s tests", name, hint, name)
	}
	return p
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("brokertest: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPort waits until addr accepts TCP connections. exited, when it closes, means the process
// died and waiting is pointless.
func waitPort(tb testing.TB, addr string, timeout time.Duration, exited <-chan struct{}) {
	tb.Helper()
	if _, err := waitUp(addr, timeout, exited); err != nil {
		tb.Fatalf("brokertest: %v", err)
	}
}

// waitUp waits until addr accepts TCP connections, and says whether the process died first.
func waitUp(addr string, timeout time.Duration, exited <-chan struct{}) (died bool, err error) {
	up := eventually.Within(timeout, func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return true
		}
		select {
		case <-exited:
			died = true
		default:
		}
		return died
	})
	switch {
	case died:
		return true, fmt.Errorf("server for %s exited while starting", addr)
	case !up:
		return false, fmt.Errorf("%s not accepting connections after %v: %v", addr, timeout, err)
	}
	return false, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 1<<20 {
		return len(p), nil // keep the first MiB; enough to diagnose a start failure
	}
	return l.w.Write(p)
}

// errNotYet is returned by checks that should be retried.
var errNotYet = errors.New("not yet")

func notYet(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errNotYet}, args...)...)
}

// Logger returns a logger for brokers under test: silent, or text on stderr when the
// environment variable RTLAB_BROKER_LOG is set (to "debug" for debug lines).
func Logger() *slog.Logger {
	switch os.Getenv("RTLAB_BROKER_LOG") {
	case "":
		return slog.New(slog.DiscardHandler)
	case "debug":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
