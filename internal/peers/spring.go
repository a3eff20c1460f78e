package peers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/rtlab/rtlab/internal/results"
	peersrc "github.com/rtlab/rtlab/tools/peers"
)

// The Spring peer: tools/peers/spring-stomp, a Spring Boot application with the simple broker,
// endpoint /location, SEND to /pub/location/{group} relayed to /sub/location/{group}. The
// sources are in the binary; the lab writes them into the peer cache and builds the jar with
// Maven once per version of the sources, then starts it with a stated heap.

// springHeap is the Spring peer's -Xmx: a stated heap, so its memory figures say what it was given.
const springHeap = "1g"

// springSources returns the embedded project and a hash of it, which names its build.
func springSources() (fs.FS, string, error) {
	src, err := fs.Sub(peersrc.SpringSTOMP, "spring-stomp")
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	err = fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("reading the Spring peer's sources: %w", err)
	}
	return src, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// SpringVersion names the Spring Boot version the peer's pom.xml builds with.
func SpringVersion() string {
	pom, _ := fs.ReadFile(peersrc.SpringSTOMP, "spring-stomp/pom.xml")
	m := regexp.MustCompile(`spring-boot-starter-parent</artifactId>\s*<version>([^<]+)</version>`).FindSubmatch(pom)
	if m == nil {
		return "Spring Boot (simple broker)"
	}
	return "Spring Boot " + string(m[1]) + " (simple broker)"
}

// SpringJar returns the Spring peer's jar: jar (--spring-jar), or the one built from the
// embedded sources in the peer cache, building it first when it is not there (mvn package,
// about half a minute with Maven's repository filled, more the first time). status hears about
// a build.
func SpringJar(ctx context.Context, jar, cache string, status io.Writer) (string, error) {
	if jar != "" {
		if _, err := os.Stat(jar); err != nil {
			return "", setupErr("--spring-jar", "%v", err)
		}
		return jar, nil
	}
	src, hash, err := springSources()
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(filepath.Join(cache, "spring-stomp-"+hash))
	if err != nil {
		return "", err
	}
	jar = filepath.Join(dir, "target", "spring-stomp.jar")
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", setupErr("--server", "spring: the Spring peer is built with Maven, and mvn is not installed (apt-get install maven openjdk-17-jdk-headless), or give --spring-jar")
	}
	// Build in a directory of its own and move it into place, so that an interrupted or
	// concurrent build never leaves a half-written jar where the next run looks.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("spring: peer cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "spring-stomp-build-")
	if err != nil {
		return "", fmt.Errorf("spring: peer cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, src); err != nil {
		return "", fmt.Errorf("spring: writing the sources: %w", err)
	}
	fmt.Fprintf(status, "bench: building the Spring peer into %s (mvn package, once)\n", dir)
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-DskipTests", "package")
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("spring: mvn package failed (%v): %s", err, lastLines(out.String(), 15))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(jar); serr != nil { // not another build that finished first
			return "", fmt.Errorf("spring: keeping the build: %w", err)
		}
	}
	return jar, nil
}

// StartSpring starts the Spring peer's jar on a free port of 127.0.0.1 and waits until /readyz
// answers.
func StartSpring(ctx context.Context, jar string, logw io.Writer, extra ...string) (*Server, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, setupErr("--server", "spring: java is not installed (apt-get install openjdk-17-jre-headless)")
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	dir, err := os.MkdirTemp("", "rtlab-bench-spring-")
	if err != nil {
		return nil, fmt.Errorf("creating Spring's working directory: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"-Xmx" + springHeap, "-jar", jar, "--server.port=" + strconv.Itoa(port), "--server.address=127.0.0.1"}, extra...)
	return launch{kind: results.KindSpring, bin: java, args: args, env: os.Environ(), dir: dir, addr: addr, readyTimeout: 90 * time.Second,
		ready: func(ctx context.Context, s *Server) error { return ProbeReady(ctx, s.Addr) }}.start(ctx, logw)
}

// lastLines returns the last n lines of s, joined by " | " for a one-line error.
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
