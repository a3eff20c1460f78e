#!/bin/sh
# version.sh prints the version make build stamps into rtlab: a release tag (v0.9.0) as 0.9.0,
# a commit past it as 0.9.0+12-g6e1cc73 (commits since, then the commit), with -dirty when the
# checkout has changes. Before the release is tagged, commits count from the one that set
# main.go's release. Nothing is printed outside a git checkout (rtlab then says what Go recorded).
set -eu
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
if d=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "$d" | sed -E -e 's/^v//' -e 's/-([0-9]+-g[0-9a-f]+(-dirty)?)$/+\1/' -e 's/^([^+]*)-dirty$/\1+dirty/'
  exit 0
fi
release=$(sed -n 's/^const release = "\(.*\)"$/\1/p' cmd/rtlab/main.go)
base=$(git log -1 --format=%H -G'^const release = ' -- cmd/rtlab/main.go)
[ -n "$release" ] && [ -n "$base" ] || exit 0
dirty=$(git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
echo "$release+$(git rev-list --count "$base..HEAD")-g$(git rev-parse --short=7 HEAD)$dirty"
