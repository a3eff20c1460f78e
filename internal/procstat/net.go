package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// defaultPorts are the ports a broker URL without one means.
var defaultPorts = map[string]int{"redis": 6379, "rediss": 6379, "nats": 4222, "tls": 4222, "amqp": 5672, "amqps": 5671}

// ListenerPID returns the process of the (broker) server that rawURL names, when it listens on a
// loopback address of this machine: its port is looked up among the listening sockets of
// /proc/net/tcp and tcp6, and the socket among the processes' open files. It returns "" for
// memory, a remote host, or a process it may not read.
func ListenerPID(rawURL string) string {
	if strings.ContainsAny(rawURL, " \t") {
		return "" // several servers, topics sharded over them: one process would not be the broker's CPU
	}
	u, err := url.Parse(rawURL)
	if err != nil || defaultPorts[u.Scheme] == 0 {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return ""
	}
	port := defaultPorts[u.Scheme]
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return ""
		}
	}
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return ""
	}
	return socketOwner(inodes)
}

// Listener is a local process that listens on an address a URL names.
type Listener struct {
	Addr string // host:port
	PID  string
}

// Listeners returns the (broker) server processes of this machine that raw names: each of
// several space-separated URLs, and for a Redis Cluster URL its node and its addr nodes (the
// masters it was given; others are not found).
func Listeners(raw string) []Listener {
	var addrs []string
	for _, u := range strings.Fields(raw) {
		scheme, rest, ok := strings.Cut(u, "+cluster://")
		if !ok {
			addrs = append(addrs, u)
			continue
		}
		host, query, _ := strings.Cut(rest, "?")
		host, _, _ = strings.Cut(host, "/")
		addrs = append(addrs, scheme+"://"+host)
		q, _ := url.ParseQuery(query)
		for _, a := range q["addr"] {
			addrs = append(addrs, scheme+"://"+a)
		}
	}
	var ps []Listener
	for _, a := range addrs {
		if pid := ListenerPID(a); pid != "" {
			name := a
			if u, err := url.Parse(a); err == nil {
				name = u.Host
			}
			ps = append(ps, Listener{Addr: name, PID: pid})
		}
	}
	return ps
}

// listeningInodes returns the inodes of the TCP sockets listening on port, any address.
func listeningInodes(port int) map[string]bool {
	inodes := map[string]bool{}
	hexPort := fmt.Sprintf("%04X", port) // as /proc/net/tcp writes it
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A: LISTEN
				continue
			}
			if _, p, ok := strings.Cut(fs[1], ":"); ok && p == hexPort {
				inodes[fs[9]] = true
			}
		}
	}
	return inodes
}

// socketOwner returns the first process with an open socket among inodes, or "".
func socketOwner(inodes map[string]bool) string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			link, err := os.Readlink(dir + "/fd/" + fd.Name())
			if err != nil {
				continue
			}
			if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
				return filepath.Base(dir)
			}
		}
	}
	return ""
}
