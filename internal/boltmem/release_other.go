//go:build !linux

package boltmem

// dropMapped does nothing where MADV_DONTNEED's semantics on a shared file mapping are not
// those of Linux.
func dropMapped(uintptr, int64) error { return nil }
