package target

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Var is a placeholder a template may hold.
type Var uint8

// The placeholders, as {name} in a template.
const (
	VarNone   Var = iota
	VarGroup      // the user's group number
	VarUser       // the user's name (the profile's user template, u{vu} by default)
	VarVU         // the user's number in the run
	VarSeq        // the publication's sequence number
	VarTS         // the publication's intended send time, Unix nanoseconds
	VarTSMs       // the same in milliseconds, with six decimals
	VarTSUs       // the same in microseconds, with three decimals
	VarToken      // the user's token (auth)
	VarCursor     // the cursor of the last poll answer
)

var varNames = map[string]Var{
	"group": VarGroup, "user": VarUser, "vu": VarVU, "seq": VarSeq, "ts": VarTS,
	"ts_ms": VarTSMs, "ts_us": VarTSUs, "token": VarToken, "cursor": VarCursor,
}

// Values are what a template is filled with.
type Values struct {
	Group, VU, Seq int
	TS             int64 // Unix ns
	User, Token    string
	Cursor         string
}

type part struct {
	lit string
	v   Var
}

// Template is a string with {placeholders}; ${NAME} was replaced by the environment's NAME
// when the profile was read.
type Template struct {
	src   string
	parts []part
	uses  uint32 // bit per Var
}

// ParseTemplate reads s. A { followed by lower-case letters and underscores and a } is a
// placeholder and must be a known one; any other brace is text, so JSON bodies need no escapes.
func ParseTemplate(s string) (*Template, error) {
	s, err := expandEnv(s)
	if err != nil {
		return nil, err
	}
	t := &Template{src: s}
	lit := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] == '_') {
			j++
		}
		if j == i+1 || j >= len(s) || s[j] != '}' {
			continue
		}
		v, ok := varNames[s[i+1:j]]
		if !ok {
			return nil, fmt.Errorf("unknown placeholder %s; want one of {group} {user} {vu} {seq} {ts} {ts_ms} {ts_us} {token} {cursor}", s[i:j+1])
		}
		if i > lit {
			t.parts = append(t.parts, part{lit: s[lit:i]})
		}
		t.parts = append(t.parts, part{v: v})
		t.uses |= 1 << v
		lit, i = j+1, j
	}
	if lit < len(s) {
		t.parts = append(t.parts, part{lit: s[lit:]})
	}
	return t, nil
}

// expandEnv replaces ${NAME} with the environment's NAME; an unset one is an error, so that a
// token or secret never goes out empty.
func expandEnv(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		name := s[i+2 : i+j]
		val, ok := os.LookupEnv(name)
		if !ok || name == "" {
			return "", fmt.Errorf("environment variable %q is not set", name)
		}
		b.WriteString(s[:i])
		b.WriteString(val)
		s = s[i+j+1:]
	}
}

// Uses reports whether the template holds placeholder v.
func (t *Template) Uses(v Var) bool { return t != nil && t.uses&(1<<v) != 0 }

// String is the template as written (environment expanded).
func (t *Template) String() string {
	if t == nil {
		return ""
	}
	return t.src
}

// Append appends the template filled with vals.
func (t *Template) Append(dst []byte, vals *Values) []byte {
	if t == nil {
		return dst
	}
	for _, p := range t.parts {
		switch p.v {
		case VarNone:
			dst = append(dst, p.lit...)
		case VarGroup:
			dst = strconv.AppendInt(dst, int64(vals.Group), 10)
		case VarUser:
			dst = append(dst, vals.User...)
		case VarVU:
			dst = strconv.AppendInt(dst, int64(vals.VU), 10)
		case VarSeq:
			dst = strconv.AppendInt(dst, int64(vals.Seq), 10)
		case VarTS:
			dst = strconv.AppendInt(dst, vals.TS, 10)
		case VarTSMs:
			dst = appendFixed(dst, vals.TS, 1e6)
		case VarTSUs:
			dst = appendFixed(dst, vals.TS, 1e3)
		case VarToken:
			dst = append(dst, vals.Token...)
		case VarCursor:
			dst = append(dst, vals.Cursor...)
		}
	}
	return dst
}

// Render is Append into a new string.
func (t *Template) Render(vals *Values) string { return string(t.Append(nil, vals)) }

// appendFixed appends ns divided by unit as a decimal with all the digits of the remainder,
// so a server that keeps it as a double loses no more than a double must.
func appendFixed(dst []byte, ns, unit int64) []byte {
	dst = strconv.AppendInt(dst, ns/unit, 10)
	dst = append(dst, '.')
	frac := strconv.FormatInt(ns%unit+unit, 10)
	return append(dst, frac[1:]...)
}
