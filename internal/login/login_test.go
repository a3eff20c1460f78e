package login

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestLoginLogoutAndRestart: open dev mode signs any name; a logout revokes the token (twice
// is fine, none is 401), and a node that starts later on the same store refuses it too.
func TestLoginLogoutAndRestart(t *testing.T) {
	secret := []byte("login-test-secret-0123456789abcdef")
	var mux *http.ServeMux
	s := tt.NewServer(t, tt.ServerConfig{Routes: func(m *http.ServeMux, _ *transport.Server) { mux = m }})
	st := state.NewMemory()
	newNode := func() (*Revoker, *auth.Verifier) {
		set := auth.NewRevocations(100, nil)
		v, err := auth.New(auth.Config{Secret: secret, Revocations: set})
		if err != nil {
			t.Fatal(err)
		}
		rv := NewRevoker(s.Hub, st, set, s.Transport, "_rtlab/revocations", slog.New(slog.DiscardHandler))
		if err := rv.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		return rv, v
	}
	rv, v := newNode()
	signer, err := auth.NewSigner(secret, time.Hour, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	Routes(mux, s.Transport, rv, Config{Signer: signer, Verifier: v})

	var ans struct{ Token, User string }
	if code := tt.Post(t, s.URL+"/api/login", `{"user":"ann"}`, &ans); code != 200 || ans.User != "ann" {
		t.Fatalf("login: %d %+v", code, ans)
	}
	if code := tt.Post(t, s.URL+"/api/login", `[1]`, nil); code != http.StatusBadRequest {
		t.Fatalf("login with a bad body: %d", code)
	}
	logout := func(tok string) int {
		req := httptest.NewRequest("POST", s.URL+"/api/logout", strings.NewReader(""))
		req.RequestURI = ""
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := logout(""); code != http.StatusUnauthorized {
		t.Fatalf("logout without a token: %d", code)
	}
	for range 2 {
		if code := logout(ans.Token); code != 200 {
			t.Fatalf("logout: %d", code)
		}
	}
	if _, err := v.Verify(ans.Token); !errors.Is(err, auth.ErrRevoked) {
		t.Fatalf("the logged-out token: %v", err)
	}
	if _, later := newNode(); !errors.Is(verifyErr(later, ans.Token), auth.ErrRevoked) {
		t.Fatal("a node started later takes the logged-out token")
	}
}

func verifyErr(v *auth.Verifier, tok string) error {
	_, err := v.Verify(tok)
	return err
}

func TestBearerToken(t *testing.T) {
	for _, c := range []struct{ header, query, want string }{
		{"Bearer abc", "", "abc"},
		{"Bearer  abc ", "", "abc"},
		{"", "access_token=q", "q"},
		{"Basic x", "access_token=q", "q"},
		{"", "", ""},
	} {
		r := httptest.NewRequest("GET", "/?"+c.query, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := BearerToken(r); got != c.want {
			t.Errorf("%q %q: %q, want %q", c.header, c.query, got, c.want)
		}
	}
}
