#!/usr/bin/env bash
# Builds the poolcoord image, and a pod sandbox ("pause") image, as OCI archives,
# with no container engine and no registry: the binaries come from this tree's
# build (scripts/build.sh), the shared libraries they link from Debian 12 packages
# fetched from the configured Debian mirror (mmdebstrap --variant=extract), and
# umoci writes the OCI image.
#
# Usage: scripts/build-image.sh [--refresh] [--source URL] [--binaries DIR]
#   --refresh       fetch the Debian packages again (they are kept in <DIR>/image/debs,
#                   and fetched again by themselves when the set of packages changes)
#   --source URL    the org.opencontainers.image.source label (default: git's origin)
#   --binaries DIR  take the three programs as built in DIR (default: build/, built
#                   first with scripts/build.sh); the images go to DIR/image
# Environment: POOLCOORD_DEBIAN_MIRROR (default: the Debian and debian-security
# URIs of /etc/apt/sources*).
#
# Out, in build/image/ (DIR/image):
#   poolcoord-<version>.oci.tar  docker.io/poolcoord/poolcoord-apiserver:<version>
#                                (the chart's default image), <version> = the
#                                chart's appVersion
#   pause.oci.tar                localhost/poolcoord/pause:<catatonit version>
# Each is an OCI image layout in a tar (OCI archive) whose index names the tag
# only; give the repository when loading it, e.g.
#   ctr -n k8s.io images import --base-name docker.io/poolcoord/poolcoord-apiserver <archive>
#   skopeo copy oci-archive:<archive> docker://<registry>/poolcoord/poolcoord-apiserver:<version>
#
# The poolcoord image holds poolcoord-apiserver (the entrypoint), poolcoord-agent
# and kubectl-pool in /usr/local/bin, the libraries `ldd` lists for them (by
# soname, from the packages that ship them) and /etc/passwd and /etc/group
# naming uid/gid 65532; no shell, no package manager. It runs as 65532:65532,
# with a read-only root filesystem (the chart's securityContext).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
t0=$SECONDS
REFRESH=0
SOURCE=""
BIN_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --refresh) REFRESH=1 ;;
    --source) SOURCE="$2"; shift ;;
    --binaries) BIN_DIR="$(cd "$2" && pwd)"; shift ;;
    *) echo "usage: $0 [--refresh] [--source URL] [--binaries DIR]" >&2; exit 2 ;;
  esac
  shift
done

if [ "$(id -u)" != 0 ]; then
  echo "error: $0 needs root (mmdebstrap unpacks packages as root, chroot tries the programs, umoci keeps" \
       "file owners): sudo $0" >&2
  exit 1
fi
# The binaries link this machine's libraries; the image takes the same sonames
# from the same release's packages, so both must be Debian 12.
if ! grep -q '^12' /etc/debian_version 2>/dev/null; then
  echo "error: $0 builds on Debian 12 (bookworm): the image's libraries come from bookworm" >&2
  exit 1
fi
scripts/install-deps.sh --packages mmdebstrap umoci
BINS=(poolcoord-apiserver poolcoord-agent kubectl-pool)
if [ -z "$BIN_DIR" ]; then
  scripts/build.sh "${BINS[@]}"
  BIN_DIR="$ROOT/build"
fi
for b in "${BINS[@]}"; do
  if [ ! -x "$BIN_DIR/$b" ]; then echo "error: $BIN_DIR/$b is not built" >&2; exit 1; fi
done

VERSION="$(awk -F'"' '/^appVersion:/ {print $2}' charts/poolcoord/Chart.yaml)"
REPOSITORY="docker.io/poolcoord/poolcoord-apiserver"
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$REVISION" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then REVISION="$REVISION-dirty"; fi
if [ -z "$SOURCE" ]; then
  SOURCE="$(git config --get remote.origin.url 2>/dev/null || true)"
  if [ -z "$SOURCE" ]; then
    SOURCE="file://$ROOT"
    echo "note: no git origin; the source label says $SOURCE (give --source for an image you publish)" >&2
  fi
fi

OUT="$BIN_DIR/image"
WORK="$OUT/work"
DEBS="$OUT/debs"
mkdir -p "$OUT"
# One build at a time in OUT (the node tests of two suites may ask at once).
exec 9>"$OUT/.lock"
flock 9
rm -rf "$WORK"
mkdir -p "$WORK"

# --- the shared libraries the binaries load, and the packages that ship them.
# `ldd` prints "soname => /path (addr)" for each and the loader on a line of its own.
mapfile -t LIBS < <(for b in "${BINS[@]}"; do ldd "$BIN_DIR/$b"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $1 " " $3} $1 ~ /^\// {print "LOADER " $1}' | sort -u)
forms() {  # a host path as dpkg may have recorded it (merged /usr: /lib or /usr/lib)
  case "$1" in /usr/*) echo "$1"; echo "${1#/usr}" ;; *) echo "$1"; echo "/usr$1" ;; esac
  readlink -f "$1"
}
mapfile -t QUERY < <(for entry in "${LIBS[@]}"; do forms "${entry#* }"; done | sort -u)
OWNERS="$(dpkg -S "${QUERY[@]}" 2>/dev/null || true)"
PKGS=()
for entry in "${LIBS[@]}"; do
  path="${entry#* }"
  pkg=""
  while read -r f && [ -z "$pkg" ]; do
    pkg="$(awk -v f="$f" '$NF == f {sub(/:.*/, ""); print; exit}' <<<"$OWNERS")"
  done < <(forms "$path")
  if [ -z "$pkg" ]; then echo "error: no Debian package ships $path" >&2; exit 1; fi
  PKGS+=("$pkg")
done
mapfile -t PKGS < <(printf '%s\n' "${PKGS[@]}" catatonit | sort -u)

# --- the packages, unpacked (not installed) from the mirror
if [ -n "${POOLCOORD_DEBIAN_MIRROR:-}" ]; then
  MIRRORS=("deb $POOLCOORD_DEBIAN_MIRROR bookworm main" "deb $POOLCOORD_DEBIAN_MIRROR bookworm-updates main")
else
  uris="$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
             2>/dev/null || true; } |
    awk '$1 == "URIs:" {for (i = 2; i <= NF; i++) print $i}
         $1 == "deb" {print ($2 ~ /^\[/) ? $3 : $2}')"
  main="$(grep -m1 '/debian/*$' <<<"$uris" || true)"
  security="$(grep -m1 '/debian-security/*$' <<<"$uris" || true)"
  if [ -z "$main" ]; then
    echo "error: no Debian mirror in /etc/apt/sources*: set POOLCOORD_DEBIAN_MIRROR" >&2
    exit 1
  fi
  MIRRORS=("deb $main bookworm main" "deb $main bookworm-updates main")
  if [ -n "$security" ]; then MIRRORS+=("deb $security bookworm-security main"); fi
fi
KEY="$(printf '%s\n' "${PKGS[@]}" "${MIRRORS[@]}" | sha256sum | cut -c1-16)"
if [ "$REFRESH" = 1 ] || [ "$(cat "$DEBS/.key" 2>/dev/null)" != "$KEY" ]; then
  rm -rf "$DEBS"
  t=$SECONDS
  mmdebstrap --quiet --variant=extract --include="$(IFS=,; echo "${PKGS[*]}")" bookworm "$DEBS" \
    "${MIRRORS[@]}"
  echo "$KEY" > "$DEBS/.key"
  echo "fetched ${#PKGS[@]} Debian packages in $((SECONDS - t)) s"
else
  echo "reusing the Debian packages fetched $(date -r "$DEBS/.key" '+%F %T') (--refresh fetches them again)"
fi

# --- the poolcoord root filesystem: merged /usr, as Debian 12 lays it out
R="$WORK/rootfs"
mkdir -p "$R/usr/local/bin" "$R/usr/lib/x86_64-linux-gnu" "$R/usr/lib64" "$R/etc" "$R/tmp"
chmod 1777 "$R/tmp"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
for b in "${BINS[@]}"; do
  strip --strip-debug -o "$R/usr/local/bin/$b" "$BIN_DIR/$b"
done
find_in_debs() {  # a soname's file in the unpacked packages
  local f
  for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu; do
    f="$DEBS/$d/$1"
    if [ -e "$f" ]; then readlink -f "$f"; return 0; fi
  done
  return 1
}
for entry in "${LIBS[@]}"; do
  name="${entry%% *}" path="${entry#* }"
  if [ "$name" = LOADER ]; then
    so="$(basename "$path")"
    src="$(find_in_debs "$so")" || { echo "error: the loader $so is in no fetched package" >&2; exit 1; }
    cp "$src" "$R/usr/lib/x86_64-linux-gnu/$so"
    ln -s "../lib/x86_64-linux-gnu/$so" "$R/usr/lib64/$so"
  else
    src="$(find_in_debs "$name")" || { echo "error: $name ($path) is in no fetched package" >&2; exit 1; }
    cp "$src" "$R/usr/lib/x86_64-linux-gnu/$name"
  fi
done
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\npoolcoord:x:65532:65532:poolcoord:/nonexistent:/usr/sbin/nologin\n' \
  > "$R/etc/passwd"
printf 'root:x:0:\npoolcoord:x:65532:\n' > "$R/etc/group"
# The image's own check: each program starts from these files alone.
for b in "${BINS[@]}"; do
  if ! chroot --userspec=65532:65532 "$R" "/usr/local/bin/$b" --help >/dev/null 2>"$WORK/$b.err"; then
    echo "error: $b does not start inside the image:" >&2
    cat "$WORK/$b.err" >&2
    exit 1
  fi
done

# --- OCI images
CREATED="$(date -u +%FT%TZ)"
image() {  # layout tag rootfs config-args...
  local layout="$1" tag="$2" rootfs="$3"
  shift 3
  umoci init --layout "$layout"
  umoci new --image "$layout:$tag"
  umoci unpack --image "$layout:$tag" "$WORK/bundle"
  cp -a "$rootfs/." "$WORK/bundle/rootfs/"
  umoci repack --image "$layout:$tag" "$WORK/bundle"
  rm -rf "$WORK/bundle"
  umoci config --image "$layout:$tag" --created "$CREATED" --config.workingdir / "$@"
  umoci gc --layout "$layout"
}
label() { echo "--config.label=org.opencontainers.image.$1=$2"; }
image "$WORK/poolcoord" "$VERSION" "$R" \
  --config.user 65532:65532 --config.entrypoint /usr/local/bin/poolcoord-apiserver \
  --config.env PATH=/usr/local/bin --config.exposedports 8443/tcp \
  "$(label title poolcoord)" \
  "$(label description "poolcoord-apiserver (the entrypoint), poolcoord-agent and kubectl-pool")" \
  "$(label source "$SOURCE")" "$(label version "$VERSION")" "$(label revision "$REVISION")" \
  "$(label created "$CREATED")"
tar -C "$WORK/poolcoord" -cf "$OUT/poolcoord-$VERSION.oci.tar.new" .
mv "$OUT/poolcoord-$VERSION.oci.tar.new" "$OUT/poolcoord-$VERSION.oci.tar"

# The pod sandbox: Debian's catatonit (static) as a pause process, -P.
# "tini version 0.1.7_catatonit"
CATATONIT="$("$DEBS/usr/bin/catatonit" --version 2>&1 | awk '{print $3; exit}')"
PAUSE_TAG="catatonit-${CATATONIT%_catatonit}"
P="$WORK/pause-rootfs"
mkdir -p "$P/usr/bin"
cp "$DEBS/usr/bin/catatonit" "$P/usr/bin/catatonit"
image "$WORK/pause" "$PAUSE_TAG" "$P" --config.user 65535:65535 \
  --config.entrypoint /usr/bin/catatonit --config.entrypoint -P \
  "$(label title pause)" "$(label description "pod sandbox: Debian's catatonit -P")"
tar -C "$WORK/pause" -cf "$OUT/pause.oci.tar.new" .
mv "$OUT/pause.oci.tar.new" "$OUT/pause.oci.tar"
printf '%s\n' "docker.io/poolcoord/poolcoord-apiserver:$VERSION" "localhost/poolcoord/pause:$PAUSE_TAG" \
  > "$OUT/images.txt"

rootfs_kib="$(du -sk "$R" | cut -f1)"
rm -rf "$WORK"
echo "$REPOSITORY:$VERSION: $OUT/poolcoord-$VERSION.oci.tar," \
  "$(($(stat -c %s "$OUT/poolcoord-$VERSION.oci.tar") / 1024)) KiB (root filesystem $rootfs_kib KiB" \
  "unpacked), revision $REVISION"
echo "localhost/poolcoord/pause:$PAUSE_TAG: $OUT/pause.oci.tar, $(($(stat -c %s "$OUT/pause.oci.tar") / 1024)) KiB"
echo "built in $((SECONDS - t0)) s"
