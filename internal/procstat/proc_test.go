package procstat

import "testing"

func TestParseMachineCPU(t *testing.T) {
	tests := []struct {
		name               string
		stat               string
		busy, steal, total uint64
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice: guest time is part of
		// user and nice already, so it must not count twice.
		{"virtual machine", "cpu  2807415 8802 1161112 8241689 28867 0 188745 181973 500 20\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
			2807415 + 8802 + 1161112 + 188745 + 181973, 181973, 2807415 + 8802 + 1161112 + 8241689 + 28867 + 188745 + 181973},
		{"old kernel without steal", "cpu 10 0 5 100 1\n", 15, 0, 116},
		{"not /proc/stat", "intr 1 2 3\n", 0, 0, 0},
		{"empty", "", 0, 0, 0},
	}
	for _, tt := range tests {
		busy, steal, total := ParseMachineCPU([]byte(tt.stat))
		if busy != tt.busy || steal != tt.steal || total != tt.total {
			t.Errorf("%s: got busy %d steal %d total %d, want %d %d %d", tt.name, busy, steal, total, tt.busy, tt.steal, tt.total)
		}
	}
}

func TestStatusBytes(t *testing.T) {
	rss, ok := StatusBytes("self", "VmRSS:")
	if !ok || rss == 0 || rss%1024 != 0 {
		t.Errorf("VmRSS of this process: %d, %v; want a positive count of KiB in bytes", rss, ok)
	}
	if _, ok := StatusBytes("self", "NoSuchKey:"); ok {
		t.Error("a key /proc does not have was read")
	}
	if _, ok := StatusBytes("0", "VmRSS:"); ok {
		t.Error("process 0 was read")
	}
}
