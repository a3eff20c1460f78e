// Package jsonscan walks raw JSON without unmarshalling it or allocating: it finds where
// values, strings and members begin and end, and hands out slices of the input. Escapes are
// left as they are. The bench's message parser (a hot path) and the target profiles' paths
// both use it; it imports nothing of the project.
package jsonscan

import "errors"

// ErrMalformed is what every function here returns for input that is not the JSON it expects.
var ErrMalformed = errors.New("malformed JSON")

// WalkObject calls fn for every member of the object starting at b[i] (after white space) with
// the raw key (no quotes, escapes left as they are) and the raw value. It returns the index
// after the object, or the first error, fn's included.
func WalkObject(b []byte, i int, fn func(key, val []byte) error) (int, error) {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return i, ErrMalformed
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		kend, err := SkipString(b, i)
		if err != nil {
			return i, err
		}
		key := b[i+1 : kend-1]
		i = SkipWS(b, kend)
		if i >= len(b) || b[i] != ':' {
			return i, ErrMalformed
		}
		i = SkipWS(b, i+1)
		vend, err := SkipValue(b, i)
		if err != nil {
			return i, err
		}
		if err := fn(key, b[i:vend]); err != nil {
			return i, err
		}
		i = SkipWS(b, vend)
		if i >= len(b) {
			return i, ErrMalformed
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, ErrMalformed
		}
	}
}

// EachElement calls fn with every element of the JSON array b (white space around it
// allowed), stopping at fn's first error.
func EachElement(b []byte, fn func(elem []byte) error) error {
	i := SkipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return ErrMalformed
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		end, err := SkipValue(b, i)
		if err != nil {
			return err
		}
		if err := fn(b[i:end]); err != nil {
			return err
		}
		i = SkipWS(b, end)
		if i >= len(b) {
			return ErrMalformed
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case ']':
			return nil
		default:
			return ErrMalformed
		}
	}
}

// SkipValue returns the index just after the JSON value starting at b[i]. Objects and arrays
// are skipped by their brackets (strings in them honoured), not checked member by member.
func SkipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, ErrMalformed
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{' || c == '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := SkipString(b, i)
				if err != nil {
					return i, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return i, ErrMalformed
	default: // number, true, false, null
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				if j == i {
					return j, ErrMalformed
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return j, ErrMalformed
		}
		return j, nil
	}
}

// SkipString returns the index just after the string starting at b[i], which must be a quote.
func SkipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, ErrMalformed
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return len(b), ErrMalformed
}

// SkipWS returns the index of the first byte at or after b[i] that is not JSON white space.
func SkipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}
