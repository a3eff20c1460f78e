package boltmem

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestRelease releases a file's pages between reads, and after Close: the data reads back the
// same and nothing fails.
func TestRelease(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 3000) }
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range 1000 {
			if err := b.Put([]byte(fmt.Sprintf("k%04d", i)), val(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		err := db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("b"))
			for i := range 1000 {
				if got := b.Get([]byte(fmt.Sprintf("k%04d", i))); !bytes.Equal(got, val(i)) {
					return fmt.Errorf("k%04d: %d bytes, not the %d written", i, len(got), len(val(i)))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		check()
		if err := Release(db); err != nil {
			t.Fatal(err)
		}
	}
	check()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Release(db); err != nil {
		t.Errorf("after Close: %v", err)
	}
}
