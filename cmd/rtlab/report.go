package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rtlab/rtlab/internal/report"
	"github.com/rtlab/rtlab/internal/results"
)

const reportUsage = `usage:
  rtlab report [--out report.html] results.json
      re-render the HTML report of one run (default: report.html next to results.json)
      and print its summary

  rtlab report [--out compare.html] a.json b.json
      compare two runs, b against a: deltas and % changes per transport and user level,
      better/worse marked (default: compare.html in the current directory), and print
      the comparison; when the two ran different user levels, each of a's is compared
      with the nearest of b's within a factor of two

The page is self-contained (charts and data inlined) and opens offline.

flags:
`

// runReport implements `rtlab report`. It returns 0 on success, 1 when the page cannot be
// written, and 2 for bad usage or input, with one line on stderr saying which.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("rtlab report", func(w io.Writer) { fmt.Fprint(w, reportUsage) })
	out := fs.String("out", "", "write the HTML here instead of the default")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	files := fs.positional

	if len(files) == 0 || len(files) > 2 {
		fmt.Fprintf(stderr, "rtlab report: %d results files given; want one (a report) or two (a comparison) (rtlab report -h)\n", len(files))
		return 2
	}
	var rs []*results.Results
	for _, f := range files {
		r, err := results.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "rtlab report: %v\n", err) // "rtlab report: FILE: ..."
			return 2
		}
		rs = append(rs, r)
	}

	dest := *out
	if dest == "" {
		if len(files) == 1 {
			dest = filepath.Join(filepath.Dir(files[0]), "report.html")
		} else {
			dest = "compare.html"
		}
	}
	for _, f := range files {
		if samePath(f, dest) {
			fmt.Fprintf(stderr, "rtlab report: --out %q: it is the results file; want another file for the page\n", dest)
			return 2
		}
	}

	if err := writeHTML(dest, rs); err != nil {
		// The temporary file's name would only confuse: say which page and why.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(stderr, "rtlab report: writing %s: %v\n", dest, err)
		return 1
	}

	if len(rs) == 1 {
		report.Summary(stdout, rs[0])
	} else {
		fmt.Fprintf(stdout, "a = %s\nb = %s\n\n", files[0], files[1])
		report.Compare(stdout, rs[0], rs[1])
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", dest)
	return 0
}

// writeHTML renders to a temporary file beside dest and renames it into place, so a failed
// render never leaves a half-written page where the last good one was.
func writeHTML(dest string, rs []*results.Results) error {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := report.WriteHTML(tmp, rs...); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// samePath reports whether two paths name the same file, as far as can be told without both
// existing.
func samePath(a, b string) bool {
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	aa, errA := filepath.Abs(a)
	bb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == bb
}
