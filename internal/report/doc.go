// Package report turns the results of `rtlab bench` into what a person reads: a terminal
// summary, a terminal comparison of two runs, and a self-contained report.html (uPlot and the
// data inlined, no network) that reads top to bottom: header and warnings, a verdict per user
// level, charts over time with every transport on the same axes, then every figure.
//
// results.json (internal/results) is its only input; results.Load refuses a schema version it
// does not know. Every figure goes through one list of metrics (metrics.go), so the terminal, the page
// and the comparison format and judge a figure the same way.
package report
