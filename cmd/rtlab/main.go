// Command rtlab is a real-time server (serve) and a load lab that measures it (bench, report).
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
		fmt.Fprintln(stdout, "rtlab", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "rtlab: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
