// Package boltmem returns a bbolt file's mapped pages from the process's resident memory.
//
// bbolt reads its file through a mapping, and every page a read or a commit touched stays in the
// process's RSS (as file-backed memory) until the mapping goes: after a flood that is most of
// the file, held long after the data left the server's memory. Release drops the process's
// mapping of those pages; they stay in the kernel's page cache (which reclaims them as any cached
// file when memory is short), and the next read of a page maps it again from there, without
// reading the disk.
package boltmem

import (
	"errors"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Release drops the process's mapping of db's pages. It costs one read transaction and one
// system call; the reads that follow fault their pages back in, so call it rarely. A no-op where
// unsupported (not Linux) and on a closed db.
func Release(db *bolt.DB) error {
	// The read transaction holds bbolt's mapping lock shared, so the mapping cannot be replaced
	// (a remap when the file outgrows it unmaps the old one) while the pages are dropped.
	err := db.View(func(tx *bolt.Tx) error {
		// tx.Size() is the file's high-water mark in this snapshot, inside the mapping: bbolt
		// maps at least the file. Pages past it were never used, so were never faulted in.
		return dropMapped(db.Info().Data, tx.Size())
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return nil
	}
	return err
}
