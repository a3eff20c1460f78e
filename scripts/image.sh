#!/bin/sh
# image.sh builds the image deploy/Dockerfile describes without a container runtime: a static
# rtlab, the machine's CA certificates and a non-root user (uid 65532) on an empty base, one
# layer, written as an OCI image layout in dist/rtlab-<version>-image.tar (load it with
# `docker load`, `podman load` or `skopeo copy oci-archive:...`).
set -eu
umask 022
cd "$(dirname "$0")/.."
version=${VERSION:-$(scripts/version.sh)}
arch=${GOARCH:-$(${GO:-go} env GOARCH)}
certs=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
out=${DIST:-dist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs home=$work/home layout=$work/layout
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/home" "$home/home/rtlab" "$layout/blobs/sha256" "$out"
CGO_ENABLED=0 GOOS=linux GOARCH=$arch ${GO:-go} build -trimpath \
  -ldflags "-s -w -X main.described=$version" -o "$root/usr/local/bin/rtlab" ./cmd/rtlab
cp "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nrtlab:x:65532:65532:rtlab:/home/rtlab:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nrtlab:x:65532:\n' > "$root/etc/group"
chmod 755 "$root" "$home"
chmod 1777 "$root/tmp"

# The same inputs give the same bytes: sorted names, no times, numeric owners; the user's
# home (its working directory, where --data-dir data goes) is the user's.
tarflags="--format=gnu --sort=name --mtime=@0 --numeric-owner"
tar -C "$root" $tarflags --owner=0 --group=0 -cf "$work/layer.tar" .
tar -C "$home" $tarflags --owner=65532 --group=65532 --no-recursion -rf "$work/layer.tar" ./home/rtlab
diffid=$(sha256sum < "$work/layer.tar" | cut -c1-64)
gzip -n -9 < "$work/layer.tar" > "$work/layer.tar.gz"

# blob moves a file into the layout under its digest and prints "digest size".
blob() {
  d=$(sha256sum < "$1" | cut -c1-64)
  s=$(wc -c < "$1" | tr -d ' ')
  mv "$1" "$layout/blobs/sha256/$d"
  echo "$d $s"
}
set -- $(blob "$work/layer.tar.gz")
layer=$1 layersize=$2
cat > "$work/config.json" <<JSON
{"architecture":"$arch","os":"linux","config":{"User":"65532:65532","Entrypoint":["/usr/local/bin/rtlab"],"Cmd":["serve"],"WorkingDir":"/home/rtlab","Env":["PATH=/usr/local/bin","RTLAB_ADDR=0.0.0.0:8080"],"ExposedPorts":{"8080/tcp":{}},"Labels":{"org.opencontainers.image.version":"$version"}},"rootfs":{"type":"layers","diff_ids":["sha256:$diffid"]},"history":[{"created_by":"scripts/image.sh"}]}
JSON
set -- $(blob "$work/config.json")
config=$1 configsize=$2
cat > "$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config","size":$configsize},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer","size":$layersize}]}
JSON
set -- $(blob "$work/manifest.json")
cat > "$layout/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$1","size":$2,"platform":{"architecture":"$arch","os":"linux"},"annotations":{"org.opencontainers.image.ref.name":"rtlab:$(echo "$version" | tr + _)"}}]}
JSON
echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
tar -C "$layout" $tarflags --owner=0 --group=0 -cf "$out/rtlab-$version-image.tar" oci-layout index.json blobs
echo "image: $out/rtlab-$version-image.tar"
