package bench

import "github.com/rtlab/rtlab/internal/peers"

// BuildRTLab lets the external tests (package bench_test) spawn the same binary.
var BuildRTLab = buildRTLab

// OnServersUp has fn told the servers of each cell once they are ready, and its transport.
func OnServersUp(o *Options, fn func(transport string, servers []*peers.Server)) { o.serversUp = fn }

// NodeOf exposes the default layout of users over nodes.
var NodeOf = nodeOf
