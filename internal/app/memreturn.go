package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go runtime gives freed heap back to the system slowly, keeping about as much as the
// heap's next goal: after a flood has been evicted (rooms' windows, topics, a burst of
// connections), the process would hold that memory for many minutes. returnMemory looks every
// memoryCheck and, when the free heap not yet returned is over memoryFreeFloor and twice what
// is in use (more than a busy heap's collections leave free), returns it at once (a full collection, at most once per memoryCheck, and only
// then: a server whose heap stays busy is left to the runtime).
const (
	memoryCheck     = 30 * time.Second
	memoryFreeFloor = 16 << 20
)

func returnMemory(ctx context.Context) {
	t := time.NewTicker(memoryCheck)
	defer t.Stop()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
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
	}
}
