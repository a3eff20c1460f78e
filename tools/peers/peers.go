// Package peers holds the sources of the servers the load lab compares rtlab with and builds
// itself: spring-stomp, a minimal Spring Boot STOMP server with the simple broker, as the seed
// projects ran theirs. `rtlab bench --server spring` writes these files into its cache and
// builds them with Maven once.
package peers

import "embed"

// SpringSTOMP is the Maven project of the Spring peer, under spring-stomp/.
//
//go:embed spring-stomp/pom.xml spring-stomp/src
var SpringSTOMP embed.FS
