package login

import (
	"runtime"
	"syscall"
)

// niced runs check on an OS thread of its own at a lower scheduling priority (nice 10), so a
// password check (bcrypt: tens of milliseconds of CPU) gives way to the threads serving
// connections whenever the cores are contended, instead of competing with them as an equal.
// The thread ends with the check: a thread cannot take its priority back unprivileged, and
// the Go runtime discards a thread whose goroutine exits locked to it.
func niced(check func() bool) bool {
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes when this goroutine ends
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 10)
		done <- check()
	}()
	return <-done
}
