package ops

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// needImageTools skips a test that builds release files unless RTLAB_REQUIRE_IMAGE is set; it
// needs root to run the image's binary as another user, and GNU tar.
func needImageTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"tar", "gzip", "sha256sum", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (chroot to the image's filesystem)")
	}
	switch {
	case len(missing) > 0 && os.Getenv("RTLAB_REQUIRE_IMAGE") != "":
		t.Fatalf("RTLAB_REQUIRE_IMAGE is set, and missing: %s", strings.Join(missing, ", "))
	case len(missing) > 0:
		t.Skipf("missing: %s", strings.Join(missing, ", "))
	case testing.Short() && os.Getenv("RTLAB_REQUIRE_IMAGE") == "":
		t.Skip("builds rtlab for release")
	}
}

// script runs scripts/name with env and returns its output.
func script(t *testing.T, name string, env ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "scripts", name))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestRelease runs make release's script for two targets: the linux archive holds the binary, which
// names the version, LICENSE and README.md; SHA256SUMS matches; the notes are CHANGELOG.md's
// section of the release.
func TestRelease(t *testing.T) {
	needImageTools(t)
	dist := t.TempDir()
	// darwin too: code that builds only on Linux breaks the release.
	script(t, "release.sh", "DIST="+dist, "VERSION=0.9.0", "TARGETS=darwin/arm64 linux/amd64")
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, n := range []string{"rtlab-0.9.0-darwin-arm64.tar.gz", "rtlab-0.9.0-linux-amd64.tar.gz"} {
		want += sha256File(t, filepath.Join(dist, n)) + "  " + n + "\n"
	}
	if string(sums) != want {
		t.Errorf("SHA256SUMS: %q, want %q", sums, want)
	}
	const name = "rtlab-0.9.0-linux-amd64.tar.gz"
	unpacked := t.TempDir()
	files := untar(t, filepath.Join(dist, name), unpacked, true)
	if out, err := exec.Command(filepath.Join(unpacked, "rtlab-0.9.0-linux-amd64", "rtlab"), "version").Output(); string(out) != "rtlab 0.9.0\n" {
		t.Errorf("the archive's rtlab version: %q (%v)", out, err)
	}
	if got := strings.Join(files, " "); got != "rtlab-0.9.0-linux-amd64/ rtlab-0.9.0-linux-amd64/LICENSE rtlab-0.9.0-linux-amd64/README.md rtlab-0.9.0-linux-amd64/rtlab" {
		t.Errorf("archive holds %s", got)
	}
	notes, _ := os.ReadFile(filepath.Join(dist, "RELEASE-NOTES.md"))
	log, _ := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	section := regexp.MustCompile(`(?s)\n## 0\.9\.0\n(.*?)(\n## |$)`).FindSubmatch(log)
	if section == nil || !bytes.HasPrefix(notes, []byte("# rtlab 0.9.0\n")) || !bytes.Contains(notes, bytes.TrimSpace(section[1])) {
		t.Errorf("RELEASE-NOTES.md is not CHANGELOG.md's 0.9.0 section:\n%.300s", notes)
	}
}

// TestImage builds the container image without a runtime (make image) and checks it as a
// runtime would use it: every blob is named by its sha256, the config runs as the non-root
// user deploy/Dockerfile names, and the binary runs from the unpacked filesystem as that user,
// prints its version, and serves with a data directory in the user's home and the CA
// certificates in place.
func TestImage(t *testing.T) {
	needImageTools(t)
	dist := t.TempDir()
	const version = "9.9.9+1-gabcdef0"
	script(t, "image.sh", "DIST="+dist, "VERSION="+version)
	layout := t.TempDir()
	untar(t, filepath.Join(dist, "rtlab-"+version+"-image.tar"), layout, false)
	cfg, layer := readLayout(t, layout)
	if cfg.Config.User != "65532:65532" || cfg.Config.Entrypoint[0] != "/usr/local/bin/rtlab" {
		t.Errorf("image config: user %q, entrypoint %q", cfg.Config.User, cfg.Config.Entrypoint)
	}
	docker, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"USER " + cfg.Config.User, "WORKDIR " + cfg.Config.WorkingDir, `ENTRYPOINT ["/usr/local/bin/rtlab"]`} {
		if !bytes.Contains(docker, []byte("\n"+line+"\n")) {
			t.Errorf("deploy/Dockerfile has no %q, as the image script builds", line)
		}
	}
	rootfs := t.TempDir()
	untar(t, layer, rootfs, true)
	checkRootfs(t, rootfs)

	chroot := func(args ...string) *exec.Cmd {
		return exec.Command("chroot", append([]string{"--userspec=65532:65532", "--groups=65532", rootfs, "/usr/local/bin/rtlab"}, args...)...)
	}
	if out, err := chroot("version").CombinedOutput(); err != nil || string(out) != "rtlab "+version+"\n" {
		t.Errorf("rtlab version in the image as uid 65532: %q (%v)", out, err)
	}
	cmd := chroot("serve", "--addr", servertest.FreeAddr(t), "--data-dir", "/home/rtlab/data")
	line := servertest.StartUntil(t, cmd, `msg="rtlab serving"`, 60*time.Second)
	servertest.Interrupt(cmd)
	if !strings.Contains(line, "/home/rtlab/data/rtlab.db") {
		t.Errorf("start line in the image: %s", line)
	}
}

// imageConfig is what TestImage reads of the OCI image config.
type imageConfig struct {
	Config struct {
		User       string
		Entrypoint []string
		WorkingDir string
	}
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// readLayout checks an OCI image layout's digests, index to manifest to config and layer, and
// returns the config and the path of the (gzipped) layer.
func readLayout(t *testing.T, dir string) (imageConfig, string) {
	t.Helper()
	blob := func(digest string, size int64, into any) string {
		t.Helper()
		path := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
		if st, err := os.Stat(path); err != nil || st.Size() != size || "sha256:"+sha256File(t, path) != digest {
			t.Fatalf("blob %s: size %d wanted, digest or size wrong (%v)", digest, size, err)
		}
		if into != nil {
			b, _ := os.ReadFile(path)
			if err := json.Unmarshal(b, into); err != nil {
				t.Fatalf("blob %s: %v", digest, err)
			}
		}
		return path
	}
	type desc struct {
		Digest string
		Size   int64
	}
	var index struct{ Manifests []desc }
	var manifest struct {
		Config desc
		Layers []desc
	}
	var cfg imageConfig
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || json.Unmarshal(b, &index) != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %s (%v)", b, err)
	}
	blob(index.Manifests[0].Digest, index.Manifests[0].Size, &manifest)
	blob(manifest.Config.Digest, manifest.Config.Size, &cfg)
	if len(manifest.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("manifest layers %v, config diff_ids %v: want one", manifest.Layers, cfg.RootFS.DiffIDs)
	}
	layer := blob(manifest.Layers[0].Digest, manifest.Layers[0].Size, nil)
	f, _ := os.Open(layer)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil || "sha256:"+hex.EncodeToString(h.Sum(nil)) != cfg.RootFS.DiffIDs[0] {
		t.Fatalf("layer's uncompressed digest is not the config's diff_id %s (%v)", cfg.RootFS.DiffIDs[0], err)
	}
	return cfg, layer
}

// checkRootfs: the user 65532 is in /etc/passwd with its home, which it owns; the CA
// certificates parse.
func checkRootfs(t *testing.T, rootfs string) {
	t.Helper()
	passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if !regexp.MustCompile(`(?m)^\w+:x:65532:65532:[^:]*:/home/rtlab:`).Match(passwd) {
		t.Errorf("/etc/passwd has no user 65532 with home /home/rtlab:\n%s", passwd)
	}
	out, err := exec.Command("stat", "-c", "%u:%g %a", filepath.Join(rootfs, "home", "rtlab")).Output()
	if err != nil || strings.TrimSpace(string(out)) != "65532:65532 755" {
		t.Errorf("/home/rtlab: %s (%v), want 65532:65532 755", out, err)
	}
	pem, _ := os.ReadFile(filepath.Join(rootfs, "etc", "ssl", "certs", "ca-certificates.crt"))
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificate")
	}
}

// untar unpacks archive (gzipped when gz) into dir with GNU tar, keeping owners, and lists it.
func untar(t *testing.T, archive, dir string, gz bool) []string {
	t.Helper()
	flags := "-x"
	if gz {
		flags = "-xz"
	}
	if out, err := exec.Command("tar", flags, "--same-owner", "--numeric-owner", "-p", "-f", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar %s: %v\n%s", archive, err, out)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if gz {
		if r, err = gzip.NewReader(r); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for tr := tar.NewReader(r); ; {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	return hex.EncodeToString(h.Sum(nil))
}
