package target

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.yaml.in/yaml/v3"
)

// Auth gives each user a token, {token} in templates: minted from a secret, or line i mod n of
// a file of tokens.
type Auth struct {
	secret []byte
	claims []Header
	ttl    time.Duration
	tokens []string
}

// Token returns the token of user vu (its {user} name is user).
func (a *Auth) Token(vu, group int, user string, now time.Time) (string, error) {
	if a == nil {
		return "", nil
	}
	if len(a.tokens) > 0 {
		return a.tokens[vu%len(a.tokens)], nil
	}
	vals := &Values{VU: vu, Group: group, User: user}
	claims := jwt.MapClaims{"sub": user, "iat": now.Unix(), "exp": now.Add(a.ttl).Unix()}
	for _, c := range a.claims {
		s := c.Value.Render(vals)
		// A claim that reads as a whole number goes as a number (exp, nbf, ids).
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			claims[c.Name] = n
		} else {
			claims[c.Name] = s
		}
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.secret)
	if err != nil {
		return "", fmt.Errorf("minting a token: %w", err)
	}
	return tok, nil
}

func (w *walker) auth(n *yaml.Node, at string) (*Auth, error) {
	a := &Auth{ttl: 24 * time.Hour}
	var file string
	var jwtNode *yaml.Node
	err := w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"tokens_file": func(v *yaml.Node, at string) (err error) { file, err = w.str(v, at); return err },
		"jwt": func(v *yaml.Node, at string) error {
			jwtNode = v
			return w.jwt(v, at, a)
		},
	})
	if err != nil {
		return nil, err
	}
	switch {
	case file != "" && jwtNode != nil:
		return nil, w.errf(n, at, "give jwt or tokens_file, not both")
	case file != "":
		if !filepath.IsAbs(file) {
			file = filepath.Join(w.dir, file)
		}
		if a.tokens, err = readLines(file); err != nil || len(a.tokens) == 0 {
			return nil, w.errf(n, at+".tokens_file", "want a file of tokens, one a line: %v", nonNil(err, "it is empty"))
		}
	case jwtNode == nil:
		return nil, w.errf(n, at, "want jwt: {secret_env: NAME, claims: {...}} or tokens_file: FILE")
	}
	return a, nil
}

func nonNil(err error, def string) string {
	if err != nil {
		return err.Error()
	}
	return def
}

func (w *walker) jwt(n *yaml.Node, at string, a *Auth) error {
	alg := "HS256"
	err := w.fields(n, at, map[string]func(*yaml.Node, string) error{
		"secret": func(v *yaml.Node, at string) error {
			s, err := w.tmpl(v, at)
			if err == nil {
				a.secret = []byte(s.String())
			}
			return err
		},
		"secret_env": func(v *yaml.Node, at string) error {
			name, err := w.str(v, at)
			if err != nil {
				return err
			}
			s, ok := os.LookupEnv(name)
			if !ok || s == "" {
				return w.errf(v, at, "environment variable %q is not set", name)
			}
			a.secret = []byte(s)
			return nil
		},
		"alg":    func(v *yaml.Node, at string) (err error) { alg, err = w.str(v, at); return err },
		"claims": func(v *yaml.Node, at string) (err error) { a.claims, err = w.headers(v, at); return err },
		"ttl":    func(v *yaml.Node, at string) (err error) { a.ttl, err = w.dur(v, at); return err },
	})
	switch {
	case err != nil:
		return err
	case alg != "HS256":
		return w.errf(n, at+".alg", "only HS256 is minted, not %q", alg)
	case len(a.secret) == 0:
		return w.errf(n, at, "want secret or secret_env")
	}
	return nil
}
