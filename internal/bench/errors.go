package bench

import "errors"

// Sentinel errors of the generator, kept together. They end up as labels in the results'
// error counts, so their texts say what happened from the user's side.
var (
	errJSON        = errors.New("bench: malformed JSON")
	errBadResponse = errors.New("bench: malformed HTTP response")
	errConnClose   = errors.New("bench: server closed the keep-alive connection")
	errNoConn      = errors.New("bench: not connected")
	errNoAnswer    = errors.New("publish: no answer before the end of the run")
)
