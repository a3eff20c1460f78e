package peers

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// RabbitMQ's Web-STOMP, as the seeds' STOMP relay used it: each run cell starts a private node
// (its own node name, epmd, ports, Mnesia and log directories in a temporary directory) with the
// rabbitmq_web_stomp plugin, and users speak STOMP over WebSocket on /ws with destinations on
// amq.topic. Starting a node takes 5-10 s.

// rabbitScript is Debian's start script that runs the node as the calling user (the wrapper in
// /usr/sbin would switch to the rabbitmq user).
const rabbitScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// RabbitBinaries finds the start script and epmd, and checks that the Web-STOMP plugin is there.
func RabbitBinaries() (script, epmd, version string, err error) {
	script = rabbitScript
	if _, err := os.Stat(script); err != nil {
		if script, err = exec.LookPath("rabbitmq-server"); err != nil {
			return "", "", "", setupErr("--server", "rabbitmq: rabbitmq-server is not installed (apt-get install rabbitmq-server)")
		}
	}
	if epmd, err = exec.LookPath("epmd"); err != nil {
		return "", "", "", setupErr("--server", "rabbitmq: epmd is not installed (it comes with rabbitmq-server's erlang-base)")
	}
	plugins, _ := filepath.Glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_web_stomp-*")
	if len(plugins) == 0 {
		return "", "", "", setupErr("--server", "rabbitmq: the rabbitmq_web_stomp plugin is not installed (Debian's rabbitmq-server ships it)")
	}
	version = "RabbitMQ " + strings.TrimPrefix(filepath.Base(filepath.Dir(filepath.Dir(plugins[0]))), "rabbitmq_server-") + " (rabbitmq_web_stomp)"
	return script, epmd, version, nil
}

// StartRabbit starts a private RabbitMQ node with Web-STOMP on a free port of 127.0.0.1 and
// waits until ready (a STOMP session over Web-STOMP's address) reports it CONNECTED.
func StartRabbit(ctx context.Context, logw io.Writer, ready func(ctx context.Context, addr string) error) (*Server, error) {
	script, epmd, _, err := RabbitBinaries()
	if err != nil {
		return nil, err
	}
	var ports [4]int // Web-STOMP, AMQP, distribution, epmd
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "rtlab-bench-rabbitmq-")
	if err != nil {
		return nil, fmt.Errorf("creating RabbitMQ's working directory: %w", err)
	}
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nweb_stomp.tcp.ip = 127.0.0.1\nweb_stomp.tcp.port = %d\nstomp.listeners.tcp = none\n", ports[1], ports[0])
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[rabbitmq_web_stomp].\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	// A private epmd, so the node registers its name without a system-wide one, and goes
	// with it.
	e := exec.Command(epmd, "-port", strconv.Itoa(ports[3]))
	e.SysProcAttr = ownGroup()
	if err := e.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting epmd: %w", err)
	}
	stopEpmd := func() {
		_ = syscall.Kill(-e.Process.Pid, syscall.SIGKILL)
		_ = e.Wait()
	}
	env := append(os.Environ(),
		"HOME="+dir,
		"RABBITMQ_NODENAME=rtlabbench"+strconv.Itoa(ports[0])+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(ports[1]),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(ports[2]),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
		"ERL_EPMD_PORT="+strconv.Itoa(ports[3]),
	)
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	return launch{kind: results.KindRabbitMQ, bin: script, env: env, dir: dir, addr: addr, readyTimeout: 90 * time.Second,
		ready:   func(ctx context.Context, s *Server) error { return ready(ctx, s.Addr) },
		cleanup: []func(){stopEpmd}}.start(ctx, logw)
}
