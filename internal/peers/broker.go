package peers

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SpawnedBrokers are the broker servers the lab can start itself (--broker redis, nats or
// amqp, without an address): one private server per run cell, which a fault can restart.
var SpawnedBrokers = []string{"redis", "nats", "amqp"}

// Broker is a broker server process the lab started: Redis without persistence (a restart
// loses every key, so nodes begin a new epoch), NATS with JetStream, or a private RabbitMQ
// node; NATS and RabbitMQ keep their data in their directory over a restart.
type Broker struct {
	Name string // "redis", "nats" or "amqp"
	URL  string // what rtlab's --broker takes
	Addr string // 127.0.0.1:port

	l    launch
	dir  string
	logw io.Writer
	epmd *exec.Cmd // RabbitMQ's private epmd

	mu  sync.Mutex
	srv *Server // the running process; nil while restarting
}

// BrokerBinary finds name's server executable; the error is a *SetupError naming --broker.
func BrokerBinary(name string) (string, error) {
	prog := map[string]string{"redis": "redis-server", "nats": "nats-server", "amqp": "rabbitmq-server"}[name]
	if name == "amqp" {
		// The Debian wrapper in /usr/sbin would su to the rabbitmq user.
		if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err == nil {
			return "/usr/lib/rabbitmq/bin/rabbitmq-server", nil
		}
	}
	bin, err := exec.LookPath(prog)
	if err != nil {
		return "", setupErr("--broker", "%s: %s is not installed (the lab starts it)", name, prog)
	}
	return bin, nil
}

// StartBroker starts a private broker server of name (SpawnedBrokers) on a free loopback port
// and waits until it takes clients.
func StartBroker(ctx context.Context, name string, logw io.Writer) (*Broker, error) {
	bin, err := BrokerBinary(name)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "rtlab-bench-broker-")
	if err != nil {
		return nil, fmt.Errorf("creating the broker's directory: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	b := &Broker{Name: name, Addr: addr, dir: dir, logw: logw}
	b.l = launch{kind: name, bin: bin, addr: addr, readyTimeout: 90 * time.Second,
		ready: func(ctx context.Context, s *Server) error { return dialOnce(ctx, s.Addr) }}
	switch name {
	case "redis":
		b.URL = "redis://" + addr + "/0"
		b.l.args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--protected-mode", "no", "--daemonize", "no"}
	case "nats":
		b.URL = "nats://" + addr
		b.l.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js")}
	default:
		b.URL = "amqp://guest:guest@" + addr + "/"
		if err := b.rabbitEnv(port); err != nil {
			b.Stop()
			return nil, err
		}
	}
	if err := b.Start(ctx); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// rabbitEnv prepares a private RabbitMQ node: its own node name, epmd and directories.
func (b *Broker) rabbitEnv(port int) error {
	dist, err := FreePort()
	if err != nil {
		return err
	}
	epmdPort, err := FreePort()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		return err
	}
	b.l.env = append(os.Environ(), "HOME="+b.dir,
		"RABBITMQ_NODENAME=rtlabbroker"+strconv.Itoa(port)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1", "RABBITMQ_NODE_PORT="+strconv.Itoa(port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(b.dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(b.dir, "log"),
		"RABBITMQ_LOGS=-", "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(b.dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(b.dir, "rabbitmq"), "ERL_EPMD_PORT="+strconv.Itoa(epmdPort))
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		return setupErr("--broker", "amqp: epmd is not installed (it comes with rabbitmq-server)")
	}
	b.epmd = exec.Command(epmd, "-port", strconv.Itoa(epmdPort))
	b.epmd.SysProcAttr = ownGroup()
	if err := b.epmd.Start(); err != nil {
		b.epmd = nil
		return fmt.Errorf("starting epmd: %w", err)
	}
	return nil
}

// dialOnce is nil when addr takes a TCP connection.
func dialOnce(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Start starts the broker's process (again, after Kill), on the same port and data.
func (b *Broker) Start(ctx context.Context) error {
	s, err := b.l.start(ctx, b.logw)
	if err != nil {
		return fmt.Errorf("starting the %s broker: %w", b.Name, err)
	}
	b.mu.Lock()
	b.srv = s
	b.mu.Unlock()
	return nil
}

// Kill ends the broker's process: SIGTERM, as an operator's restart does (SIGKILL after 10 s).
func (b *Broker) Kill() {
	b.mu.Lock()
	s := b.srv
	b.srv = nil
	b.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// PID is the running process's id, "" while it is down.
func (b *Broker) PID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return ""
	}
	return b.srv.PID
}

// Stop ends the broker for good and removes its data.
func (b *Broker) Stop() {
	b.Kill()
	if b.epmd != nil {
		_ = syscall.Kill(-b.epmd.Process.Pid, syscall.SIGKILL)
		_ = b.epmd.Wait()
	}
	_ = os.RemoveAll(b.dir)
}
