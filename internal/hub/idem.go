package hub

import (
	"errors"
	"fmt"
)

// MaxKeyLen is the longest idempotency key accepted.
const MaxKeyLen = 64

// ErrBadKey refuses an idempotency key that is too long or not printable ASCII.
var ErrBadKey = errors.New("hub: bad idempotency key")

// ErrOutcomeUnknown says a publication was handed to the broker but its answer never came: it
// may have been published, or may still be. A retry with the same key is answered with the
// original position if it was.
var ErrOutcomeUnknown = errors.New("hub: outcome unknown")

// CheckKey refuses an idempotency key of more than MaxKeyLen bytes or with a byte outside
// printable ASCII (it travels in HTTP, STOMP and NATS headers). An empty key is no key.
func CheckKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: byte 0x%02x at %d (printable ASCII only, no spaces)", ErrBadKey, c, i)
		}
	}
	return nil
}

// OutcomeUnknown is the error a broker returns when a publication left the node but its
// answer did not come (a timeout, a connection lost after the write): an *OutcomeUnknownError.
func OutcomeUnknown(broker string, cause error) error {
	return &OutcomeUnknownError{Broker: broker, Cause: cause}
}

// OutcomeUnknownError wraps ErrOutcomeUnknown and the cause. Its text names only the broker.
type OutcomeUnknownError struct {
	Broker string
	Cause  error
}

func (e *OutcomeUnknownError) Error() string {
	if e.Broker == "" {
		return "the broker did not answer: the publication may yet be published; a retry with the same idempotency key is safe"
	}
	return e.Broker + " broker did not answer: the publication may yet be published; a retry with the same idempotency key is safe"
}

func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Cause} }

// Duplicate returns the answer to a retry of p: p's position, marked Duplicate.
func Duplicate(p *Publication) *Publication {
	return &Publication{Topic: p.Topic, Offset: p.Offset, Epoch: p.Epoch, Time: p.Time,
		Sender: p.Sender, Type: p.Type, Data: p.Data, Key: p.Key, Duplicate: true}
}
