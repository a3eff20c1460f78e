package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// MaxUsers bounds a login users file.
const MaxUsers = 100_000

// Users are the credentials POST /api/login checks when a verifier is configured: user names
// with bcrypt hashes of their passwords.
type Users struct {
	hashes map[string][]byte
	dummy  []byte // compared for unknown users, so timing does not tell which names exist
}

// LoadUsers reads a users file: one "name:bcrypt-hash" per line (as `htpasswd -B` writes);
// blank lines and lines starting with # are skipped.
func LoadUsers(path string) (*Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: users: %w", err)
	}
	u, err := ParseUsers(b)
	if err != nil {
		return nil, fmt.Errorf("auth: users %s: %w", path, err)
	}
	return u, nil
}

// ParseUsers parses the contents of a users file.
func ParseUsers(b []byte) (*Users, error) {
	u := &Users{hashes: make(map[string][]byte)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want name:bcrypt-hash", n)
		}
		if err := ValidUser(name); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("line %d (%s): not a bcrypt hash: %v", n, name, err)
		}
		if len(u.hashes) == MaxUsers {
			return nil, fmt.Errorf("more than %d users", MaxUsers)
		}
		u.hashes[name] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(u.hashes) == 0 {
		return nil, fmt.Errorf("no users")
	}
	for _, h := range u.hashes { // a dummy of the same cost as a real one
		cost, _ := bcrypt.Cost(h)
		u.dummy, _ = bcrypt.GenerateFromPassword([]byte("not a password"), cost)
		break
	}
	return u, nil
}

// Check reports whether password is user's.
func (u *Users) Check(user, password string) bool {
	h, ok := u.hashes[user]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(u.dummy, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(h, []byte(password)) == nil
}

// Len is the number of users.
func (u *Users) Len() int { return len(u.hashes) }
