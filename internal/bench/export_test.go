package bench

// BuildRTLab lets the external tests (package bench_test) spawn the same binary.
var BuildRTLab = buildRTLab
