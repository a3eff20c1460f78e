package shrink

import "testing"

func TestMapTidyKeepsEntries(t *testing.T) {
	m := NewMap[int, string](Floor)
	for i := range 10 * Floor {
		m.Set(i, "x")
	}
	for i := range 10 * Floor {
		if i%100 != 0 {
			m.Delete(i)
		}
	}
	before := m.M
	m.Tidy()
	if len(m.M) != 10*Floor/100+1 {
		t.Fatalf("after Tidy: %d entries", len(m.M))
	}
	for i := 0; i < 10*Floor; i += 100 {
		if m.M[i] != "x" {
			t.Fatalf("entry %d lost", i)
		}
	}
	m.M[-1] = "y" // a rebuilt map is a new one: the old one is not written to
	if _, ok := before[-1]; ok {
		t.Fatal("Tidy kept the grown map")
	}
	if m.peak != len(m.M)-1 {
		t.Fatalf("peak %d after Tidy", m.peak)
	}
}

func TestMapSmallNotRebuilt(t *testing.T) {
	m := NewMap[int, int](Floor)
	for i := range Floor {
		m.Set(i, i)
	}
	for i := range Floor - 1 {
		m.Delete(i)
	}
	m.M[-1] = -1
	keep := m.M
	m.Tidy()
	m.Clear()
	if len(keep) != 0 {
		t.Fatal("a small map was rebuilt instead of cleared")
	}
}

func TestSlice(t *testing.T) {
	if s := Slice(make([]int, 5, 10)); s == nil || cap(s) != 10 || len(s) != 0 {
		t.Fatalf("small slice: len %d cap %d", len(s), cap(s))
	}
	if s := Slice(make([]int, 5, 2*Floor)); s != nil {
		t.Fatal("a large slice was kept")
	}
}
