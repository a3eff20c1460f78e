//go:build !linux

package peers

import "syscall"

// ownGroup is the attributes of a server the bench starts: a process group of its own (only
// Linux can also kill it with the bench).
func ownGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
