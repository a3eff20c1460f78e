#!/bin/sh
# release.sh fills dist/ with a release: for each of TARGETS (linux and darwin on amd64 and
# arm64) rtlab-<version>-<os>-<arch>.tar.gz holding the binary, LICENSE and README.md; SHA256SUMS
# of those; and RELEASE-NOTES.md, the CHANGELOG section of the version (Unreleased past a release).
set -eu
cd "$(dirname "$0")/.."
version=${VERSION:-$(scripts/version.sh)}
out=${DIST:-dist}
targets=${TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
[ -n "$version" ] || { echo "release: no version (VERSION=... or a git checkout)" >&2; exit 1; }

# A tagged release (0.9.0) has its own section; a build past one (0.9.0+3-g...) is Unreleased.
case $version in *+*) section=Unreleased ;; *) section=$version ;; esac
notes=$(awk -v h="## $section" '$0 == h {on = 1; next} on && /^## / {exit} on' CHANGELOG.md)
[ -n "$(echo "$notes" | tr -d '[:space:]')" ] || { echo "release: CHANGELOG.md has no section \"## $section\"" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out"
printf '# rtlab %s\n%s\n' "$version" "$notes" > "$out/RELEASE-NOTES.md"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for target in $targets; do
  name=rtlab-$version-${target%/*}-${target#*/}
  mkdir "$stage/$name"
  CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} ${GO:-go} build -trimpath \
    -ldflags "-s -w -X main.described=$version" -o "$stage/$name/rtlab" ./cmd/rtlab
  cp LICENSE README.md "$stage/$name/"
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
  echo "release: $out/$name.tar.gz"
done
(cd "$out" && sha256sum -- *.tar.gz > SHA256SUMS)
