package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSystemdUnit: deploy/rtlab.service passes `systemd-analyze verify` without a warning
// (with ExecStart pointing at the binary under test, which verify requires to exist), and each
// RTLAB_ variable it sets is a flag of rtlab serve. Without systemd-analyze it skips, unless
// RTLAB_REQUIRE_SYSTEMD is set.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(root, "deploy", "rtlab.service"))
	if err != nil {
		t.Fatal(err)
	}
	help := helpDefaults(t, "serve")
	for _, m := range regexp.MustCompile(`(?m)^Environment=RTLAB_([A-Z_]+)=`).FindAllStringSubmatch(string(unit), -1) {
		if name := strings.ToLower(strings.ReplaceAll(m[1], "_", "-")); help[name] == "" {
			if _, ok := help[name]; !ok {
				t.Errorf("deploy/rtlab.service sets RTLAB_%s, but rtlab serve has no --%s", m[1], name)
			}
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("RTLAB_REQUIRE_SYSTEMD") != "" {
			t.Fatal("systemd-analyze not installed, and RTLAB_REQUIRE_SYSTEMD is set")
		}
		t.Skip("systemd-analyze not installed")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rtlab.service")
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/rtlab ", "ExecStart="+abs+" ", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify deploy/rtlab.service: %v\n%s", err, out)
	}
}
