package procstat

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
)

// TestBrokerPID: a broker URL on loopback names the process listening on its port, here the
// test itself; memory, remote hosts and ports nobody listens on name none.
func TestBrokerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	self := strconv.Itoa(os.Getpid())
	for _, u := range []string{
		fmt.Sprintf("redis://127.0.0.1:%d/0", port),
		fmt.Sprintf("nats://localhost:%d", port),
		fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port),
	} {
		if got := ListenerPID(u); got != self {
			t.Errorf("ListenerPID(%s) = %q, want %s", u, got, self)
		}
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	for _, u := range []string{
		"memory",
		fmt.Sprintf("redis://10.1.2.3:%d/0", port),
		fmt.Sprintf("redis://127.0.0.1:%d/0", freePort),
		"http://127.0.0.1:" + strconv.Itoa(port),
		"redis://127.0.0.1:notaport/0",
	} {
		if got := ListenerPID(u); got != "" {
			t.Errorf("ListenerPID(%s) = %q, want none", u, got)
		}
	}
}

// TestBrokerProcs: every server of a space-separated list, and a Redis Cluster URL's node and
// addr nodes, are measured; one not listening is left out.
func TestBrokerProcs(t *testing.T) {
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	self := strconv.Itoa(os.Getpid())
	for _, u := range []string{
		fmt.Sprintf("redis://127.0.0.1:%d/0 redis://127.0.0.1:%d/0", ports[0], ports[1]),
		fmt.Sprintf("redis+cluster://127.0.0.1:%d?addr=127.0.0.1:%d&addr=127.0.0.1:%d", ports[0], ports[1], freePort),
	} {
		ps := Listeners(u)
		if len(ps) != 2 || ps[0].PID != self || ps[1].PID != self || ps[1].Addr != fmt.Sprintf("127.0.0.1:%d", ports[1]) {
			t.Errorf("Listeners(%s) = %+v, want both listeners, in order", u, ps)
		}
	}
}
