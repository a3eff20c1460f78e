package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// pyjwtPython returns a Python with PyJWT (test/interop/requirements.txt), creating the venv
// .cache/interop-venv from PyPI when it is missing.
func pyjwtPython(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs("../..")
	py := filepath.Join(root, ".cache", "interop-venv", "bin", "python")
	if exec.Command(py, "-c", "import jwt, cryptography, stomp").Run() == nil {
		return py
	}
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("RTLAB_REQUIRE_INTEROP") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		skip("python3 missing: PyJWT tokens not tested")
	}
	venv := filepath.Dir(filepath.Dir(py))
	if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		skip("python3 -m venv %s: %v\n%s", venv, err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "-q", "-r", filepath.Join(root, "test", "interop", "requirements.txt"))
	if out, err := pip.CombinedOutput(); err != nil {
		skip("pip install PyJWT: %v\n%s", err, out)
	}
	return py
}

// TestTokensFromThirdPartyLibraries: tokens minted by PyJWT and node's jsonwebtoken, with
// HS256, RS256 and ES256, are accepted by a server with a secret and a PEM key file and by
// one with a JWKS; the token's sub is the publication's sender; expired and tampered tokens
// are refused.
func TestTokensFromThirdPartyLibraries(t *testing.T) {
	dir := interopDir(t)
	py := pyjwtPython(t)
	tmp := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	privPEM := func(k any) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	var pub bytes.Buffer
	for _, k := range []any{&rsaKey.PublicKey, &ecKey.PublicKey} {
		der, _ := x509.MarshalPKIXPublicKey(k)
		_ = pem.Encode(&pub, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	pubFile := filepath.Join(tmp, "keys.pem")
	if err := os.WriteFile(pubFile, pub.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &rsaKey.PublicKey, KeyID: "r1", Algorithm: "RS256", Use: "sig"},
			{Key: &ecKey.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"},
		}})
	}))
	defer jwks.Close()
	withKeys := startServer(t, func(c *Config) {
		c.Auth = AuthConfig{Secret: testSecret, PublicKeyFile: pubFile, Issuer: "https://app.example", Audience: "rtlab"}
	})
	withJWKS := startServer(t, func(c *Config) { c.Auth = AuthConfig{JWKSURL: jwks.URL} })

	type spec struct {
		Alg    string         `json:"alg"`
		Key    string         `json:"key"`
		Kid    string         `json:"kid,omitempty"`
		Claims map[string]any `json:"claims"`
	}
	claims := func(sub string, exp time.Duration) map[string]any {
		now := time.Now()
		return map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(exp).Unix(), "iss": "https://app.example", "aud": "rtlab"}
	}
	for _, lib := range []struct {
		name string
		cmd  []string
	}{{"pyjwt", []string{py, "mint.py"}}, {"jsonwebtoken", []string{"node", "mint.mjs"}}} {
		t.Run(lib.name, func(t *testing.T) {
			specs := []spec{
				{"HS256", testSecret, "", claims(lib.name+"-hs", time.Hour)},
				{"RS256", privPEM(rsaKey), "r1", claims(lib.name+"-rs", time.Hour)},
				{"ES256", privPEM(ecKey), "e1", claims(lib.name+"-es", time.Hour)},
				{"ES256", privPEM(ecKey), "e1", claims(lib.name+"-old", -time.Minute)},
			}
			in, _ := json.Marshal(specs)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, lib.cmd[0], lib.cmd[1:]...)
			cmd.Dir, cmd.Stdin = dir, bytes.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", lib.name, err, stderr.String())
			}
			var toks []string
			if err := json.Unmarshal(out, &toks); err != nil || len(toks) != len(specs) {
				t.Fatalf("%s printed %q: %v", lib.name, out, err)
			}
			for i, sp := range specs {
				servers := map[string]*testServer{"keys": withKeys}
				if sp.Alg != "HS256" {
					servers["jwks"] = withJWKS
				}
				for sname, s := range servers {
					topic := fmt.Sprintf("news/%s-%d-%s", lib.name, i, sname)
					code, body := do(t, s, "POST", "/api/publish/"+topic, toks[i], `{"sender":"someone-else"}`)
					sub := sp.Claims["sub"].(string)
					if strings.HasSuffix(sub, "-old") {
						if code != 401 || !strings.Contains(body, "expired") {
							t.Errorf("%s expired token on %s: %d %s", sp.Alg, sname, code, body)
						}
						continue
					}
					if code != 200 {
						t.Errorf("%s token on %s: %d %s", sp.Alg, sname, code, body)
						continue
					}
					var ans tt.PollAnswer
					s.get(t, "/api/poll/"+topic+"?since=0&access_token="+toks[i], &ans)
					if len(ans.Publications) != 1 || ans.Publications[0].Sender != sub || !strings.Contains(string(ans.Publications[0].Data), sub) {
						t.Errorf("%s on %s: publication %+v, want sender %s", sp.Alg, sname, ans.Publications, sub)
					}
					tampered := toks[i][:len(toks[i])-4] + "AAAA"
					if code, _ := do(t, s, "GET", "/api/poll/"+topic, tampered, ""); code != 401 {
						t.Errorf("%s tampered token on %s: %d", sp.Alg, sname, code)
					}
				}
			}
		})
	}
}
