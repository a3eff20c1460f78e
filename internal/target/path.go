package target

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/rtlab/rtlab/internal/jsonscan"
)

// Path is a small JSON path: $ (the whole value), $.a.b, $.a[0].b.
type Path struct {
	src   string
	steps []step
}

type step struct {
	key string
	idx int // -1 for a key
}

// ParsePath reads a path.
func ParsePath(s string) (*Path, error) {
	bad := fmt.Errorf("%q: want a path like $.payload.seq or $.items[0].seq", s)
	if !strings.HasPrefix(s, "$") {
		return nil, bad
	}
	p := &Path{src: s}
	rest := s[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			i := 1
			for i < len(rest) && rest[i] != '.' && rest[i] != '[' {
				i++
			}
			if i == 1 {
				return nil, bad
			}
			p.steps = append(p.steps, step{key: rest[1:i], idx: -1})
			rest = rest[i:]
		case '[':
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return nil, bad
			}
			n, err := strconv.Atoi(rest[1:j])
			if err != nil || n < 0 {
				return nil, bad
			}
			p.steps = append(p.steps, step{idx: n})
			rest = rest[j+1:]
		default:
			return nil, bad
		}
	}
	return p, nil
}

func (p *Path) String() string {
	if p == nil {
		return ""
	}
	return p.src
}

// Lookup returns the raw JSON value at p in b.
func (p *Path) Lookup(b []byte) ([]byte, bool) {
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) {
		return nil, false
	}
	for _, s := range p.steps {
		var err error
		if s.idx < 0 {
			i, err = member(b, i, s.key)
		} else {
			i, err = element(b, i, s.idx)
		}
		if err != nil {
			return nil, false
		}
	}
	end, err := jsonscan.SkipValue(b, i)
	if err != nil {
		return nil, false
	}
	return b[i:end], true
}

// Each calls fn with every element of the array at p in b.
func (p *Path) Each(b []byte, fn func(elem []byte) error) error {
	arr, ok := p.Lookup(b)
	if !ok || len(arr) == 0 || arr[0] != '[' {
		return fmt.Errorf("no array at %s in: %.200s", p.src, b)
	}
	i := jsonscan.SkipWS(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		end, err := jsonscan.SkipValue(arr, i)
		if err != nil {
			return err
		}
		if err := fn(arr[i:end]); err != nil {
			return err
		}
		i = jsonscan.SkipWS(arr, end)
		if i >= len(arr) || arr[i] == ']' {
			return nil
		}
		i = jsonscan.SkipWS(arr, i+1)
	}
}

// Text returns the value at p as text: a string's contents (escapes as written) or the raw
// value.
func (p *Path) Text(b []byte) (string, bool) {
	v, ok := p.Lookup(b)
	if !ok {
		return "", false
	}
	if len(v) >= 2 && v[0] == '"' {
		return string(v[1 : len(v)-1]), true
	}
	return string(v), true
}

var errJSON = jsonscan.ErrMalformed

// member returns the index of key's value in the object at b[i].
func member(b []byte, i int, key string) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return i, errJSON
	}
	i = jsonscan.SkipWS(b, i+1)
	for i < len(b) && b[i] != '}' {
		kend, err := jsonscan.SkipString(b, i)
		if err != nil {
			return i, err
		}
		k := b[i+1 : kend-1]
		i = jsonscan.SkipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, errJSON
		}
		i = jsonscan.SkipWS(b, i+1)
		if string(k) == key {
			return i, nil
		}
		if i, err = skipPast(b, i); err != nil {
			return i, err
		}
	}
	return i, errJSON
}

// element returns the index of element n of the array at b[i].
func element(b []byte, i, n int) (int, error) {
	if i >= len(b) || b[i] != '[' {
		return i, errJSON
	}
	i = jsonscan.SkipWS(b, i+1)
	for k := 0; i < len(b) && b[i] != ']'; k++ {
		if k == n {
			return i, nil
		}
		var err error
		if i, err = skipPast(b, i); err != nil {
			return i, err
		}
	}
	return i, errJSON
}

// skipPast returns the index of what follows the value at b[i] and its comma, if any.
func skipPast(b []byte, i int) (int, error) {
	i, err := jsonscan.SkipValue(b, i)
	if err != nil {
		return i, err
	}
	i = jsonscan.SkipWS(b, i)
	if i < len(b) && b[i] == ',' {
		i = jsonscan.SkipWS(b, i+1)
	}
	return i, nil
}

// Fields are what a delivery carries of the bench: its sender, number and send time.
type Fields struct {
	VU, Seq int64
	TS      int64 // Unix ns; 0 when the profile does not say where it is
}

// Read says where deliveries are in what arrives and where the bench's fields are in them.
type Read struct {
	Event  string         // SSE: the event name of deliveries ("" takes unnamed events, "message")
	Items  *Path          // polling: the array of deliveries in an answer ($ for a bare array)
	Cursor *Path          // polling: the cursor for the next poll, {cursor} in its URL
	Match  []Match        // a message is a delivery only when all hold
	Regex  *regexp.Regexp // text messages: named groups vu, seq and ts
	VU     *Path
	Seq    *Path
	TS     *Path
	TSUnit int64 // nanoseconds per unit of TS
}

// Match holds when the value at Path is Value (a string's contents, or a raw number), or, with
// Present, when there is one at all.
type Match struct {
	Path    *Path
	Value   string
	Present bool
}

// Matches reports whether msg is a delivery.
func (r *Read) Matches(msg []byte) bool {
	for _, m := range r.Match {
		if v, ok := m.Path.Text(msg); !ok || (!m.Present && v != m.Value) {
			return false
		}
	}
	return true
}

// Extract reads the bench's fields from a delivery.
func (r *Read) Extract(msg []byte) (Fields, error) {
	if r.Regex != nil {
		return r.extractText(msg)
	}
	var f Fields
	var err error
	if f.VU, err = r.integer(r.VU, msg); err != nil {
		return f, err
	}
	if f.Seq, err = r.integer(r.Seq, msg); err != nil {
		return f, err
	}
	if r.TS != nil {
		v, ok := r.TS.Lookup(msg)
		if !ok {
			return f, fmt.Errorf("field %s missing in: %.200s", r.TS, msg)
		}
		if f.TS, err = scaled(v, r.TSUnit); err != nil {
			return f, fmt.Errorf("field %s: %w in: %.200s", r.TS, err, msg)
		}
	}
	return f, nil
}

func (r *Read) integer(p *Path, msg []byte) (int64, error) {
	v, ok := p.Lookup(msg)
	if !ok {
		return 0, fmt.Errorf("field %s missing in: %.200s", p, msg)
	}
	n, err := scaled(v, 1)
	if err != nil {
		return 0, fmt.Errorf("field %s: %w in: %.200s", p, err, msg)
	}
	return n, nil
}

func (r *Read) extractText(msg []byte) (Fields, error) {
	m := r.Regex.FindSubmatch(msg)
	if m == nil {
		return Fields{}, fmt.Errorf("regex %s does not match: %.200s", r.Regex, msg)
	}
	var f Fields
	for i, name := range r.Regex.SubexpNames() {
		var dst *int64
		unit := int64(1)
		switch name {
		case "vu":
			dst = &f.VU
		case "seq":
			dst = &f.Seq
		case "ts":
			dst, unit = &f.TS, r.TSUnit
		default:
			continue
		}
		n, err := scaled(m[i], unit)
		if err != nil {
			return f, fmt.Errorf("regex group %s: %w in: %.200s", name, err, msg)
		}
		*dst = n
	}
	return f, nil
}

// scaled reads a number (bare or quoted, integer or float such as 3.0 or 1.7e18) times unit
// as an integer. Integers are read exactly; a float must come to a whole number.
func scaled(v []byte, unit int64) (int64, error) {
	if len(v) >= 2 && v[0] == '"' {
		v = v[1 : len(v)-1]
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		if unit == 1 || (n < math.MaxInt64/unit && n > math.MinInt64/unit) {
			return n * unit, nil
		}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a number: %.40q", v)
	}
	f *= float64(unit)
	if f >= math.MaxInt64 || f <= math.MinInt64 {
		return 0, fmt.Errorf("out of range: %.40q", v)
	}
	if unit == 1 && f != math.Trunc(f) {
		return 0, fmt.Errorf("not a whole number: %.40q", v)
	}
	return int64(math.Round(f)), nil
}
