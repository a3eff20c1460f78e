package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestInstrument checks what rtlab_http_requests_total counts over real connections: the status
// code sent, 499 for a client that left before any answer, nothing for a connection taken
// over, and that flushing and hijacking still reach the connection through the wrapper.
func TestInstrument(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "test")
	waiting, left := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusBadRequest) })
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: 1\n\n"))
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("GET /takeover", func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_ = rw.Flush()
		conn.Close()
	})
	mux.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		close(waiting)
		<-r.Context().Done()
		close(left)
	})
	srv := httptest.NewServer(m.Instrument(mux, func(r *http.Request) string {
		if r.Pattern == "" {
			return "other"
		}
		return strings.TrimPrefix(r.Pattern, "GET ")
	}))
	defer srv.Close()

	for _, path := range []string{"/ok", "/ok", "/bad", "/stream", "/takeover", "/nothing"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/wait", nil)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
	}()
	<-waiting
	cancel() // leave while the handler waits
	<-left

	want := map[[2]string]float64{
		{"/ok", "200"}: 2, {"/bad", "400"}: 1, {"/stream", "200"}: 1, {"other", "404"}: 1, {"/wait", "499"}: 1,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := requests(t, reg)
		if len(got) == len(want) && func() bool {
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		}() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rtlab_http_requests_total is %v; want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond) // the /wait handler counts once it has returned
	}
}

// requests reads rtlab_http_requests_total from reg: {route, code} → count.
func requests(t *testing.T, reg *prometheus.Registry) map[[2]string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, f := range fams {
		if f.GetName() != "rtlab_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[[2]string{label(m, "route"), label(m, "code")}] = m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestBuildInfoRevision: rtlab_build_info's revision is the commit Go recorded, else the one
// in the version's build metadata (make build stamps it), and "unknown" only without either.
func TestBuildInfoRevision(t *testing.T) {
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6e1cc73f00aa"}}}
	for _, tc := range []struct {
		version string
		bi      *debug.BuildInfo
		want    string
	}{
		{"0.9.0+12-g9c37b29", nil, "9c37b29"},
		{"0.9.0+12-g9c37b29-dirty", &debug.BuildInfo{}, "9c37b29"},
		{"0.9.0+g9c37b29", nil, "9c37b29"},
		{"0.9.0+g9c37b29", vcs, "6e1cc73f00aa"},
		{"0.9.0", nil, "unknown"},
		{"0.9.0+unknown", nil, "unknown"},
	} {
		if got := revision(tc.version, tc.bi); got != tc.want {
			t.Errorf("revision(%q) = %q, want %q", tc.version, got, tc.want)
		}
	}
	reg := prometheus.NewRegistry()
	New(reg, "0.9.0+3-gabcdef1")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "rtlab_build_info" {
			continue
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "revision" && l.GetValue() == "unknown" {
				t.Errorf("rtlab_build_info of 0.9.0+3-gabcdef1 has revision=unknown")
			}
		}
		return
	}
	t.Error("no rtlab_build_info")
}
