package hub

import (
	"errors"
	"fmt"
)

// MaxTopicLen is the longest topic name accepted.
const MaxTopicLen = 200

// Errors returned by the hub. Transports map them to wire errors.
var (
	ErrBadTopic = errors.New("hub: bad topic")
	ErrClosed   = errors.New("hub: closed")
	ErrTooLarge = errors.New("hub: publication too large")
	ErrBadData  = errors.New("hub: data is not valid JSON")
	ErrBadText  = errors.New("hub: text is not valid UTF-8")
	ErrNotReady = errors.New("hub: broker not ready")
	ErrBadName  = errors.New("hub: control character in a name")
	// ErrTooManyTopics refuses a publication to a new topic when the broker holds as many
	// topics as it may and every one of them has subscribers or is being written.
	ErrTooManyTopics = errors.New("hub: too many topics")
)

// checkName refuses a publication's type or sender holding a control character (NUL, line
// breaks, DEL...): such names break logs, headers and the archive's SQL.
func checkName(field, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s holds byte 0x%02x at %d", ErrBadName, field, c, i)
		}
	}
	return nil
}

// CheckName is the check Publish makes of a publication's type and sender (field names
// which), for callers that check before publishing.
func CheckName(field, s string) error { return checkName(field, s) }

// ValidateTopic reports whether name is a valid topic: 1–200 characters of [A-Za-z0-9_.:@/-].
// The error says which character is wrong, because users mostly get this from typos.
func ValidateTopic(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrBadTopic)
	}
	if len(name) > MaxTopicLen {
		return fmt.Errorf("%w: %d characters, at most %d allowed", ErrBadTopic, len(name), MaxTopicLen)
	}
	for i := 0; i < len(name); i++ {
		if !topicChar(name[i]) {
			return fmt.Errorf("%w: character %q at %d not allowed (use A-Z a-z 0-9 _ . : @ / -)", ErrBadTopic, name[i], i)
		}
	}
	return nil
}

func topicChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '_' || c == '.' || c == ':' || c == '@' || c == '/' || c == '-':
		return true
	}
	return false
}
