package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Load reads a results.json written by `rtlab bench`. It refuses a file whose schema version
// this build does not know rather than render zeros for fields it misreads, and every error
// names the file (and no package: the caller says what it was doing), because a comparison
// reads two.
func Load(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	r, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// decode parses and validates results. The schema field is checked on its own first, so a file
// from a newer rtlab gets "schema 3" rather than a type error about a field that moved.
func decode(data []byte) (*Results, error) {
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(data, err)
	}
	switch {
	case head.Schema == nil:
		return nil, errors.New("not an rtlab results file (no \"schema\" field)")
	case *head.Schema < 1 || *head.Schema > SchemaVersion:
		// Version 1 lacks fields version 2 added (they read as 0) and its latency covered
		// receipts outside the delivery windows too; it is still worth reading.
		return nil, fmt.Errorf("results schema version %d, this rtlab reads versions 1 to %d", *head.Schema, SchemaVersion)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonError(data, err)
	}
	for i, run := range r.Runs {
		if run.Transport == "" {
			return nil, fmt.Errorf("run %d has no transport", i)
		}
		if run.Peak < 0 {
			return nil, fmt.Errorf("run %d (%s) has negative peak users %d", i, run.Transport, run.Peak)
		}
	}
	return &r, nil
}

// jsonError turns a decoding error into one line that says where in the file it happened.
func jsonError(data []byte, err error) error {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off <= 0 || off > int64(len(data)) {
		return fmt.Errorf("malformed results: %w", err)
	}
	pos := off - 1 // the decoder reports the offset after the byte it choked on
	line := 1 + bytes.Count(data[:pos], []byte{'\n'})
	col := pos - int64(bytes.LastIndexByte(data[:pos], '\n'))
	return fmt.Errorf("malformed results at line %d, column %d: %w", line, col, err)
}
