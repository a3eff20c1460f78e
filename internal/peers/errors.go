package peers

import "fmt"

// SetupError is a server that cannot start as the lab's flags say: the flag to change and why
// (centrifugo not installed, no Maven to build the Spring peer, a --spring-jar that is not
// there).
type SetupError struct {
	Flag string // e.g. "--centrifugo-bin"
	Msg  string
}

func (e *SetupError) Error() string { return e.Flag + ": " + e.Msg }

func setupErr(flag, format string, args ...any) error {
	return &SetupError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}
