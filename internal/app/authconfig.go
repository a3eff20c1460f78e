package app

import (
	"context"

	"errors"
	"fmt"
	"time"

	"github.com/rtlab/rtlab/internal/auth"
)

// AuthConfig says how clients prove who they are. With none of Secret, PublicKeyFile and JWKSURL
// the server runs in open dev mode: anyone may connect, and POST /api/login hands a token to
// any name (signed with a key kept in --data-dir/dev-secret).
type AuthConfig struct {
	Secret        string        // HS256/384/512 secret, at least 16 bytes
	PublicKeyFile string        // PEM file of RS/ES public keys
	JWKSURL       string        // JWKS of RS/ES public keys, fetched and cached
	Issuer        string        // required iss; empty: not checked
	Audience      string        // required aud; empty: not checked
	Leeway        time.Duration // clock skew tolerated on exp, nbf, iat; zero: none
	// LoginUsers is a file of name:bcrypt-hash lines; with a verifier configured, POST
	// /api/login is on only with it, and signs with Secret (which it then needs).
	LoginUsers     string
	TokenTTL       time.Duration // lifetime of tokens POST /api/login issues; zero means 24 h
	MaxRevocations int           // revoked tokens kept until they expire; zero means 100,000
	Cache          int           // verified tokens remembered (auth.Config.Cache); zero: none
}

// configured reports whether a verifier was configured (tokens required).
func (c AuthConfig) configured() bool {
	return c.Secret != "" || c.PublicKeyFile != "" || c.JWKSURL != ""
}

// methods names what verifies tokens, for the start line.
func (c AuthConfig) methods() []string {
	var m []string
	if c.Secret != "" {
		m = append(m, "HS256/384/512 (--auth-secret)")
	}
	if c.PublicKeyFile != "" {
		m = append(m, "RS/ES (--auth-public-key)")
	}
	if c.JWKSURL != "" {
		m = append(m, "RS/ES (--auth-jwks)")
	}
	return m
}

// setupAuth builds the verifier and the login signer from a.cfg.Auth; required reports
// whether tokens are required (not open dev mode).
func (a *App) setupAuth(ctx context.Context, revoked *auth.Revocations) (*auth.Verifier, bool, error) {
	c := a.cfg.Auth
	if !c.configured() {
		if c.LoginUsers != "" {
			return nil, false, errors.New("--login-users: give --auth-secret too (login tokens are signed with it)")
		}
		secret, err := devSecret(a.cfg.DataDir)
		if err != nil {
			return nil, false, err
		}
		if a.login, err = auth.NewSigner(secret, c.TokenTTL, "", nil); err != nil {
			return nil, false, fmt.Errorf("--token-ttl: %w", err)
		}
		v, err := auth.New(auth.Config{Secret: secret, Revocations: revoked, Cache: c.Cache})
		return v, false, err
	}
	vc := auth.Config{Issuer: c.Issuer, Audience: c.Audience, Leeway: c.Leeway, Revocations: revoked, Cache: c.Cache}
	if c.Secret != "" {
		vc.Secret = []byte(c.Secret)
	}
	if c.PublicKeyFile != "" {
		keys, err := auth.LoadPublicKeys(c.PublicKeyFile)
		if err != nil {
			return nil, false, fmt.Errorf("--auth-public-key: %w", err)
		}
		vc.PublicKeys = keys
	}
	if c.JWKSURL != "" {
		j, err := auth.NewJWKS(ctx, auth.JWKSConfig{URL: c.JWKSURL})
		if err != nil {
			return nil, false, fmt.Errorf("--auth-jwks: %w", err)
		}
		vc.JWKS = j
	}
	v, err := auth.New(vc)
	if err != nil {
		return nil, false, fmt.Errorf("--auth-secret/--auth-public-key/--auth-jwks: %w", err)
	}
	if c.LoginUsers != "" {
		if c.Secret == "" {
			return nil, false, errors.New("--login-users: give --auth-secret too (login tokens are signed with it)")
		}
		if a.users, err = auth.LoadUsers(c.LoginUsers); err != nil {
			return nil, false, fmt.Errorf("--login-users: %w", err)
		}
		if a.login, err = auth.NewSigner([]byte(c.Secret), c.TokenTTL, c.Issuer, nil); err != nil {
			return nil, false, fmt.Errorf("--token-ttl: %w", err)
		}
		if c.Audience != "" {
			return nil, false, errors.New("--login-users with --auth-audience: login tokens carry no audience; drop one of them")
		}
	}
	return v, true, nil
}
