// Package shrink gives memory back from maps and slices that a burst grew.
//
// A Go map keeps the buckets of the most entries it ever held, and a slice resliced to zero
// keeps its array: after a flood of names (rooms, topics) has been forgotten, the structure
// that indexed them still holds the flood's memory. The helpers here copy such a structure
// into a small one once it is mostly empty.
package shrink

// Floor is the size under which a slice is not given back, and a map's usual floor: small
// structures are not worth a copy.
const Floor = 1024

// Map is a map with the most entries it held since it was last rebuilt.
type Map[K comparable, V any] struct {
	M     map[K]V
	peak  int
	floor int
}

// NewMap returns an empty Map that is rebuilt only after holding more than floor entries (one
// of many shards of a map takes a smaller floor than Floor).
func NewMap[K comparable, V any](floor int) Map[K, V] {
	return Map[K, V]{M: make(map[K]V), floor: floor}
}

// Set stores v under k.
func (m *Map[K, V]) Set(k K, v V) {
	m.M[k] = v
	m.peak = max(m.peak, len(m.M))
}

// Delete removes k; call Tidy after a run of deletions.
func (m *Map[K, V]) Delete(k K) { delete(m.M, k) }

// Clear removes every entry, and the buckets too when the map had grown past its floor.
func (m *Map[K, V]) Clear() {
	if m.peak > m.floor {
		m.M, m.peak = make(map[K]V), 0
		return
	}
	clear(m.M)
}

// Tidy copies the map into a new one when it holds under a quarter of its peak (and the peak
// was over its floor), so the buckets the peak needed are freed.
func (m *Map[K, V]) Tidy() {
	if m.peak <= m.floor || len(m.M) >= m.peak/4 {
		return
	}
	n := make(map[K]V, len(m.M))
	for k, v := range m.M {
		n[k] = v
	}
	m.M, m.peak = n, len(n)
}

// Slice returns s emptied: the same array when its capacity is under Floor, nil otherwise.
func Slice[T any](s []T) []T {
	if cap(s) > Floor {
		return nil
	}
	return s[:0]
}
