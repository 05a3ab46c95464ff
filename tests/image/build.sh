#!/usr/bin/env bash
# Builds the container image (`make image`): a static `ruleplane` binary (glibc, +crt-static) in its own target
# directory, then image/Containerfile with buildah (daemonless; FROM scratch, so nothing is pulled) into an OCI
# archive in the user's cache. Idempotent: a second run rebuilds nothing in cargo and re-packs the archive in
# seconds. Installs buildah with apt-get when it is missing (root only). Prints the archive's path on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
work="$cache/image"
archive=${IMAGE_ARCHIVE:-$work/ruleplane.oci.tar}
log() { printf '[image] %s\n' "$*" >&2; }

ensure_buildah() {
  command -v buildah >/dev/null && return
  if [ "$(id -u)" -ne 0 ]; then
    log "buildah not found: install Debian's buildah package (apt-get install --no-install-recommends buildah)"
    exit 1
  fi
  log "installing buildah from Debian's packages (first time only)..."
  export DEBIAN_FRONTEND=noninteractive
  # FROM scratch with COPY only: no OCI runtime, fuse-overlayfs or slirp4netns needed, hence no recommends.
  apt-get install -y -q --no-install-recommends buildah >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends buildah >/dev/null; }
  buildah --version >&2
}

# The toolchain's own target, named explicitly: RUSTFLAGS then reach only the target's crates, so build scripts and
# proc-macros stay dynamic (they cannot be static) while the binary is. No musl target is needed.
triple=$(rustc -vV | sed -n 's/^host: //p')
case $triple in
  *-linux-gnu) ;;
  *) log "a static build needs a *-linux-gnu toolchain, not $triple"; exit 1 ;;
esac

ensure_buildah

# A separate target directory: these RUSTFLAGS and the release profile would otherwise invalidate the debug
# build's cache. getrandom 0.3 (through ahash) looks up glibc's getrandom() with dlsym, which finds nothing in a
# static binary, and then reads /dev/urandom; linux_getrandom calls it directly, so no device file is needed.
log "static release build of ruleplane ($triple)..."
start=$SECONDS
(cd "$root" && env -u CARGO_ENCODED_RUSTFLAGS \
  CARGO_TARGET_DIR="$cache/image-target" \
  RUSTFLAGS='-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"' \
  CARGO_PROFILE_RELEASE_STRIP=symbols \
  cargo build --release --locked -p ruleplane --target "$triple")
bin="$cache/image-target/$triple/release/ruleplane"
if ! ldd "$bin" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
  log "$bin is not statically linked:"; ldd "$bin" >&2; exit 1
fi
version=$("$bin" --version | awk '{print $2}')
log "binary: $(du -h "$bin" | cut -f1) in $((SECONDS - start)) s, version $version"

# The build context: the recipe, the user entries and the binary, nothing else.
rm -rf "$work/context" && mkdir -p "$work/context"
cp "$root/image/Containerfile" "$root/image/passwd" "$root/image/group" "$bin" "$work/context/"

revision=unknown
if git -C "$root" rev-parse --verify -q HEAD >/dev/null; then
  revision=$(git -C "$root" rev-parse HEAD)
  if [ -n "$(git -C "$root" status --porcelain -- Cargo.toml Cargo.lock config manager image)" ]; then
    revision="$revision-dirty"
  fi
fi
# Timestamps from the last commit (or SOURCE_DATE_EPOCH): the same sources give the same image digest.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}

# vfs storage under the cache: works without overlayfs or fuse, as root or in a container; it only holds the
# working container while the image is committed, so it starts empty every time.
storage="$work/storage"
rm -rf "$storage"
tmp="$archive.tmp"
rm -f "$tmp"
log "buildah build -> $archive"
buildah --storage-driver vfs --root "$storage/root" --runroot "$storage/run" \
  build --quiet --isolation chroot --identity-label=false --disable-compression=false --timestamp "$epoch" \
  --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  -f "$work/context/Containerfile" -t "oci-archive:$tmp:ruleplane:$version" "$work/context" >/dev/null
rm -rf "$storage"
mv -f "$tmp" "$archive"
log "image: $(du -h "$archive" | cut -f1), ruleplane:$version, user 65532 ($((SECONDS - start)) s in all)"
echo "$archive"
