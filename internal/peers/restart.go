package peers

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

// Kill ends the server's process group with SIGKILL, as a crash does, and waits for it.
func (s *Server) Kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Restarted starts a killed server again with the same command line (so the same ports) and
// output, and returns it: it takes over what s was to do after stopping (a log to close).
func (s *Server) Restarted(ctx context.Context) (*Server, error) {
	s.Kill()
	if s.l.dir != "" {
		if err := os.MkdirAll(s.l.dir, 0o700); err != nil {
			return nil, fmt.Errorf("restarting %s: %w", s.Kind, err)
		}
	}
	ns, err := s.l.start(ctx, s.logw)
	if err != nil {
		return nil, fmt.Errorf("restarting %s at %s: %w", s.Kind, s.Addr, err)
	}
	ns.Metrics, ns.STOMP = s.Metrics, s.STOMP
	ns.cleanup, s.cleanup = append(ns.cleanup, s.cleanup...), nil
	return ns, nil
}
