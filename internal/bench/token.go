package bench

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// mintToken signs an HS256 token for user with the servers' --auth-secret, as an application's
// backend would: with a secret the servers' POST /api/login is off. Valid for a day, longer
// than any run.
func mintToken(secret, user string) string {
	now := time.Now()
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: user, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(24 * time.Hour)),
	}).SignedString([]byte(secret))
	return tok
}
