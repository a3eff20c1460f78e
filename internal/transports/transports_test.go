package transports_test

import (
	"slices"
	"testing"

	"github.com/rtlab/rtlab/internal/transports"
)

// TestTable: ranks follow the table and unknown names sort after it; the lab's names go both
// ways; every carrier carries a transport of the table that carries its own sessions.
func TestTable(t *testing.T) {
	rows := transports.All()
	for i, r := range rows {
		if got := transports.Rank(r.Name); got != i {
			t.Errorf("rank of %s is %d, want %d", r.Name, got, i)
		}
		if back := transports.FromLab(transports.LabName(r.Name)); back != r.Name {
			t.Errorf("%s through the lab's name comes back as %s", r.Name, back)
		}
		if !slices.Contains(transports.Sessions(), r.Wire) {
			t.Errorf("%s carries %s, which carries no sessions of its own", r.Name, r.Wire)
		}
	}
	if got := transports.Rank("grpc"); got != len(rows) {
		t.Errorf("an unknown name ranks %d, want %d (after every row)", got, len(rows))
	}
	if got := transports.LabName(transports.STOMPTCP); got != "stomp-tcp" {
		t.Errorf("the lab calls stomp_tcp %q, want stomp-tcp", got)
	}
}
