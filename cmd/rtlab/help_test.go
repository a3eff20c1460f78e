package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestHelpFlagsExist: every --flag that a subcommand's -h names, in its text, its flags'
// descriptions and its examples, is a flag of that subcommand (bench -h once gave a serve flag
// as its example). A serve flag a description passes on to servers (--server-args) is named as
// such and allowed.
func TestHelpFlagsExist(t *testing.T) {
	defined := regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`)
	named := regexp.MustCompile(`(?:^|[^a-z0-9-])--([a-z][a-z0-9-]*)`)
	for _, cmd := range []string{"serve", "bench", "report"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{cmd, "-h"}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		flags := map[string]bool{}
		for _, m := range defined.FindAllStringSubmatch(stdout.String(), -1) {
			flags[m[1]] = true
		}
		if len(flags) == 0 {
			t.Fatalf("%s -h: found %d flags in\n%s", cmd, len(flags), stdout.String())
		}
		for _, m := range named.FindAllStringSubmatch(stdout.String(), -1) {
			if !flags[m[1]] && !(strings.HasSuffix(m[1], "-") && hasPrefix(flags, m[1])) {
				t.Errorf("rtlab %s -h names --%s, not a flag of rtlab %s", cmd, m[1], cmd)
			}
		}
	}
}

// hasPrefix reports whether a flag starts with prefix: help names a family as --auth-*.
func hasPrefix(flags map[string]bool, prefix string) bool {
	for f := range flags {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}
