#!/usr/bin/env bash
# Packages the static binary of the image `make image` builds (`make dist`): takes /ruleplane out of the OCI
# archive (the one given as $1, else tests/image/build.sh is run first) and writes
# ruleplane-<version>-<target>.tar.gz with its SHA-256 sum file into the user's cache ($cache/dist), never into the
# repo. Taking the binary out of the image, not out of a target directory, means the archive and the image hold the
# same bytes. Then checks what it wrote as a user would use it: the sum verifies, the archive holds only
# `ruleplane`, and the extracted binary runs `--version` and `validate examples/` with an empty environment.
# Prints the archive's path on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
out=${DIST_DIR:-$cache/dist}
log() { printf '[dist] %s\n' "$*" >&2; }

archive=${1:-$("$root/tests/image/build.sh" | tail -1)}
# The image's binary is built for the toolchain's host target (tests/image/build.sh), so that names the archive.
target=$(rustc -vV | sed -n 's/^host: //p')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The single layer's `ruleplane` file, found through the OCI index and manifest as check.sh reads them.
python3 - "$archive" "$tmp/ruleplane" <<'PY'
import json, shutil, sys, tarfile
archive, dest = sys.argv[1], sys.argv[2]
with tarfile.open(archive) as oci:
    def read(name):
        return oci.extractfile(name).read()
    def blob(digest):
        algo, hexd = digest.split(":", 1)
        return f"blobs/{algo}/{hexd}"
    index = json.loads(read("index.json"))
    manifest = json.loads(read(blob(index["manifests"][0]["digest"])))
    for layer in manifest["layers"]:
        with tarfile.open(fileobj=oci.extractfile(blob(layer["digest"])), mode="r:*") as t:
            for m in t.getmembers():
                if m.isfile() and m.name.lstrip("./") == "ruleplane":
                    with t.extractfile(m) as src, open(dest, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    sys.exit(0)
sys.exit(f"{archive}: no /ruleplane in the image")
PY
chmod 0755 "$tmp/ruleplane"
version=$("$tmp/ruleplane" --version | awk '{print $2}')
name="ruleplane-$version-$target.tar.gz"

# Reproducible: fixed order, owner and time (the last commit's, as the image), gzip without a name or time.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
mkdir -p "$out"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$tmp" -cf - ruleplane |
  gzip -9n >"$out/$name.tmp"
mv -f "$out/$name.tmp" "$out/$name"
(cd "$out" && sha256sum "$name" >"$name.sha256")
log "$out/$name ($(du -h "$out/$name" | cut -f1)), $(cut -c1-16 "$out/$name.sha256")…"

# What a user does with it, in a fresh directory.
check=$tmp/check
mkdir -p "$check"
cp "$out/$name" "$out/$name.sha256" "$check/"
(cd "$check" && sha256sum -c --quiet "$name.sha256") || { log "sha256 sum does not verify"; exit 1; }
listing=$(tar -tzf "$check/$name")
[ "$listing" = ruleplane ] || { log "the archive holds more than ruleplane: $listing"; exit 1; }
tar -xzf "$check/$name" -C "$check" ruleplane
env -i "$check/ruleplane" --version >&2
env -i "$check/ruleplane" validate "$root/examples" --crds "$root/examples/crds" >/dev/null \
  || { log "validate examples/ failed"; exit 1; }
echo "$out/$name"
