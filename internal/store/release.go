package store

import "github.com/rtlab/rtlab/internal/boltmem"

// ReleaseMapped takes the store file's pages out of this process's resident memory (see
// boltmem): after a flood of durable topics the pages it wrote and read would stay there, as
// file-backed RSS, long after the topics left memory. The server calls it from its memory check,
// at most once per check and only when the process's file-backed memory has grown. A no-op
// where unsupported and after Close.
func (s *Store) ReleaseMapped() error { return boltmem.Release(s.db) }
