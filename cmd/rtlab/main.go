// Command rtlab is a real-time server (serve) and a load lab that measures it (bench, report).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// release is this version of rtlab, a semantic version; CHANGELOG.md says what each changed.
const release = "0.9.0"

// described is the version make build stamps with -ldflags "-X main.described=..."
// (scripts/version.sh: 0.9.0+12-g6e1cc73 for 12 commits past the release, -dirty for changes).
var described = ""

// version is what the server's start line, rtlab_build_info and bench results give: the stamped
// version, else the release with the commit Go recorded (0.9.0+g6e1cc73), else +unknown.
var version = buildVersion(described, debug.ReadBuildInfo)

func buildVersion(described string, read func() (*debug.BuildInfo, bool)) string {
	if described != "" {
		return described
	}
	rev, dirty := "", ""
	if bi, ok := read(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 7:
				rev = s.Value[:7]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return release + "+unknown"
	}
	return release + "+g" + rev + dirty
}

const usage = `rtlab: a real-time server and the load lab that measures it

usage:
  rtlab serve  [flags]              run the server (rtlab serve -h for flags)
  rtlab bench  [flags]              run the load lab (rtlab bench -h)
  rtlab report [flags] results.json [other.json]
                                    render report.html from results, or compare two
  rtlab version                     print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit status:
// 0 success, 1 failure at run time, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "report":
		return runReport(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "rtlab %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "rtlab: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
