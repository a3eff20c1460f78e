package peers

import "syscall"

// ownGroup is the attributes of a server the bench starts: a process group of its own, killed
// with the bench if it dies without cleaning up.
func ownGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
