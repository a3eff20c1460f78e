//go:build !linux

package login

// niced runs check: lowering one thread's priority is Linux's alone.
func niced(check func() bool) bool { return check() }
