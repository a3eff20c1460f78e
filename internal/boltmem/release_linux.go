package boltmem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dropMapped is madvise(MADV_DONTNEED) over the first size bytes of bbolt's mapping at addr.
// bbolt v1.5.0 maps the file PROT_READ and MAP_SHARED (bolt_unix.go), so nothing in the mapping
// is private to the process: dropping a page loses nothing, and a later read faults the same
// bytes back from the page cache. (On a private or anonymous mapping the same call would zero
// the memory; this is why it is only ever done on bbolt's own data mapping, under its lock.)
func dropMapped(addr uintptr, size int64) error {
	if addr == 0 || size <= 0 {
		return nil
	}
	// A uintptr, not a slice: the mapping is not Go memory, and the system call only needs
	// the range.
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(size), unix.MADV_DONTNEED); errno != 0 {
		return fmt.Errorf("boltmem: release mapped pages: %w", errno)
	}
	return nil
}
