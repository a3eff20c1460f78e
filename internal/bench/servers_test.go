package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rtlab/rtlab/internal/peers"
)

// TestCentrifugoBinaryIsAbsolute: a relative --peer-cache or --centrifugo-bin (the default is
// .cache) names the file from the bench's directory, not from the one the server runs in.
func TestCentrifugoBinaryIsAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("PATH", "")
	bin := filepath.Join("cache", "centrifugo-"+peers.CentrifugoVersion, "centrifugo")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{PeerCache: "cache"}, {CentrifugoBin: bin}} {
		got, err := o.centrifugoBinary()
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := filepath.Abs(bin); got != want {
			t.Errorf("%+v: centrifugo is %q, want %q", o, got, want)
		}
	}
}
