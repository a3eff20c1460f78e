package brokertest

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartPostgres starts a private PostgreSQL server (Debian's postgresql package) on a free
// loopback port, with a new cluster in a temporary directory and trust authentication for the
// user rtlab; URL is a DSN for database postgres. initdb and postgres refuse to run as root, so
// as root they run as the postgres user, who owns the directory. fsync is off: tests check what
// the archive holds after a stop, not after a power loss. Stop is a fast shutdown (SIGINT:
// clients are disconnected, nothing committed is lost). It skips the test when PostgreSQL is not
// installed, or fails with RTLAB_REQUIRE_BROKERS set.
func StartPostgres(tb testing.TB) *Server {
	tb.Helper()
	bin := postgresBin(tb)
	dir, err := os.MkdirTemp("", "rtlab-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	var wrap []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("brokertest: no postgres user to run PostgreSQL as (apt-get install postgresql): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
		wrap = []string{lookPath(tb, "runuser", "apt-get install util-linux"), "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	args := append(append([]string(nil), wrap...), filepath.Join(bin, "initdb"), "-D", data, "-U", "rtlab",
		"-A", "trust", "-E", "UTF8", "--locale", "C", "--no-sync")
	initdb := exec.Command(args[0], args[1:]...)
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("brokertest: initdb: %v\n%s", err, out)
	}
	s, port := newServer(tb, "postgres", 30*time.Second)
	s.Durable = true
	s.dir = dir
	s.stopSig = syscall.SIGINT
	s.argv = append(wrap, filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-h", "127.0.0.1", "-k", dir, "-c", "fsync=off", "-c", "max_connections=200")
	s.URL = "postgres://rtlab@" + s.Addr + "/postgres?sslmode=disable"
	// The port opens before the server accepts sessions ("the database system is starting up").
	s.ready = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}
	return s.launch()
}

// postgresBin returns the directory of Debian's PostgreSQL binaries, newest version first.
func postgresBin(tb testing.TB) string {
	tb.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	return filepath.Dir(lookPath(tb, "postgres", "apt-get install postgresql"))
}
