package store

import (
	"errors"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ReleaseMapped takes the store file's pages out of this process's resident memory. bbolt reads
// the file through a mapping, and every page a read or a commit touched stays in the process's
// RSS (as file-backed memory) until the mapping goes: after a flood of durable topics that is
// the whole file, held long after the topics left memory. The pages stay in the kernel's page
// cache, which reclaims them as any cached file when memory is short; the next read of a page
// maps it again from there, without reading the disk.
//
// It costs one read transaction and one system call; the reads that follow fault their pages
// back in, so call it rarely (the server does at most once per memory check, and only when the
// process's file-backed memory has grown). A no-op where unsupported, and after Close.
func (s *Store) ReleaseMapped() error {
	// The read transaction holds bbolt's mapping lock shared, so the mapping cannot be replaced
	// (a remap when the file outgrows it unmaps the old one) while the pages are dropped.
	err := s.db.View(func(tx *bolt.Tx) error {
		// tx.Size() is the file's high-water mark in this snapshot, inside the mapping: bbolt
		// maps at least the file. Pages past it were never used, so were never faulted in.
		return dropMapped(s.db.Info().Data, tx.Size())
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return nil
	}
	return err
}
