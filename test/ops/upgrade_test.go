package ops

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestDataDirFromPreviousRelease opens a data directory the previous release wrote
// (testdata/datadir-0.9.0: rtlab.db, state.db, archive.db and dev-secret after ann entered
// chat/lobby and sent five TALKs), as docs/upgrade.md promises: the history is there in its
// epoch, the room remembers ann, and new publications continue the offsets. When a release
// changes a file's format, it adds its own fixture beside this one and keeps this test.
func TestDataDirFromPreviousRelease(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "datadir-0.9.0")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, d.Name()), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	p := servertest.Start(t, bin, "--data-dir", dir)
	d := tt.Dialer{}
	code, body := d.Call(t, "GET", p.URL()+"/api/poll/chat/lobby?since=0&epoch=2fc7onvo", "")
	var ans tt.PollAnswer
	if err := json.Unmarshal(body, &ans); code != 200 || err != nil {
		t.Fatalf("poll: %d %s", code, body)
	}
	if ans.Epoch != "2fc7onvo" || ans.Offset != 6 || !ans.Recovered || len(ans.Publications) != 6 {
		t.Fatalf("chat/lobby after the upgrade: epoch %s offset %d recovered %v, %d publications; want 2fc7onvo, 6, true, 6: %s", ans.Epoch, ans.Offset, ans.Recovered, len(ans.Publications), body)
	}
	if !strings.Contains(string(ans.Publications[5].Data), `"m5"`) {
		t.Errorf("the last publication is %s, want ann's m5", ans.Publications[5].Data)
	}
	code, body = d.Call(t, "POST", p.URL()+"/api/login", `{"user":"ann"}`)
	var login struct{ Token string }
	if err := json.Unmarshal(body, &login); code != 200 || err != nil {
		t.Fatalf("login: %d %s", code, body)
	}
	// No ENTER: the room's membership is read from state.db.
	code, body = d.Bearer(login.Token).Call(t, "POST", p.URL()+"/api/publish/chat/lobby?type=TALK", `{"message":"after the upgrade"}`)
	if code != 200 || !strings.Contains(string(body), `"offset":7`) || !strings.Contains(string(body), "2fc7onvo") {
		t.Errorf("TALK after the upgrade: %d %s; want offset 7 in epoch 2fc7onvo", code, body)
	}
}
