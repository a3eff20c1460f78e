package app

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/rtlab/rtlab/internal/procstat"
)

// The Go runtime gives freed heap back to the system slowly, keeping about as much as the
// heap's next goal: after a flood has been evicted (rooms' windows, topics, a burst of
// connections), the process would hold that memory for many minutes. returnMemory looks every
// memoryCheck and, when the free heap not yet returned is over memoryFreeFloor and twice what
// is in use (more than a busy heap's collections leave free), returns it at once (a full
// collection, at most once per memoryCheck, and only then: a server whose heap stays busy is
// left to the runtime).
//
// The bbolt files under --data-dir are mapped, and every page of them a flood wrote or read
// stays in the process's resident memory (file-backed) for as long as the mapping lives. At the
// first look, and then when that part of the RSS has grown by more than memoryFreeFloor since
// the last release, release (mappedFiles; nil without files) drops the mapped pages, which stay
// in the kernel's page cache; the reads that follow map back only what they use.
const (
	memoryCheck     = 30 * time.Second
	memoryFreeFloor = 16 << 20
)

func returnMemory(ctx context.Context, release func() error, log *slog.Logger) {
	t := time.NewTicker(memoryCheck)
	defer t.Stop()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	// The first look releases whatever the start mapped (opening the files, the archive's first
	// sweep); after that, fileBase is what a release left (the binary, libraries).
	var fileBase uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		free, inUse := samples[0].Value.Uint64(), samples[1].Value.Uint64()
		if free > memoryFreeFloor && free > 2*inUse {
			debug.FreeOSMemory()
		}
		if release == nil {
			continue
		}
		if file, ok := rssFile(); ok && file > fileBase+memoryFreeFloor {
			if err := release(); err != nil {
				log.Warn("returning the data files' mapped pages failed", "err", err)
			}
			// What remains (the binary, libraries) is not the data files': the next release
			// waits for their part to grow again.
			fileBase, _ = rssFile()
		} else if ok && file < fileBase {
			fileBase = file
		}
	}
}

// rssFile is the process's file-backed resident memory in bytes; false where /proc does not
// tell it (not Linux).
func rssFile() (uint64, bool) { return procstat.StatusBytes("self", "RssFile:") }

// mapped is a file mapped into the process whose pages can be returned (a bbolt file).
type mapped interface{ ReleaseMapped() error }

// mappedFiles returns what releases the pages of the files under --data-dir the process maps
// (the durable store, the embedded archive, the state); nil when there are none.
func (a *App) mappedFiles() func() error {
	var files []mapped
	for _, f := range a.files {
		files = append(files, f)
	}
	if a.archive != nil {
		files = append(files, a.archive)
	}
	if m, ok := a.state.(mapped); ok {
		files = append(files, m)
	}
	if len(files) == 0 {
		return nil
	}
	return func() error {
		var errs []error
		for _, f := range files {
			errs = append(errs, f.ReleaseMapped())
		}
		return errors.Join(errs...)
	}
}
