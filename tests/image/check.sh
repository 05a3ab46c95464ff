#!/usr/bin/env bash
# Checks the image archive tests/image/build.sh writes (or the one given as $1): an OCI layout holding one
# linux/amd64 image; user 65532:65532, entrypoint /ruleplane, the default command, the version label; exactly the
# binary and the user entries inside (no shell); a static binary owned by root and not writable. Then, from the
# extracted layer as user 65532 in a read-only chroot (when root), the binary runs: `--version` names the
# workspace's version and the commit, `validate` accepts examples/, the entrypoint given `validate /rules` and
# `test /rules` checks examples/ put where a mounted volume would be (the CI step docs/testing.md shows), and `run`
# as the chart runs it (in-cluster config, service account token and CA, its Leases) becomes ready against a
# private control plane (tests/control-plane; skipped when it is not built). Prints "image: N passed, M failed"
# last and exits non-zero on any failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
archive=${1:-${IMAGE_ARCHIVE:-$cache/image/ruleplane.oci.tar}}
passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$1"; [ -z "${2:-}" ] || printf '     %s\n' "$2"; }
# expect DESCRIPTION WANT GOT
expect() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "want: $2 | got: $3"; fi; }
finish() {
  echo "image: $passed passed, $failed failed$([ "$skipped" -eq 0 ] || echo ", $skipped skipped")"
  [ "$failed" -eq 0 ]
  exit
}

tmp=$(mktemp -d)
pid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  [ ! -d "$tmp/cluster" ] || "$root/tests/control-plane/cluster.sh" down --dir "$tmp/cluster" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

want_version=$(awk '/^\[workspace\.package\]/ { s = 1; next } /^\[/ { s = 0 }
  s && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$root/Cargo.toml")

if ! tar -xf "$archive" -C "$tmp" 2>/dev/null; then
  fail "archive $archive can be read (build it with: make image)"
  finish
fi

# What the archive says, as KEY<TAB>VALUE lines; the layers are unpacked in order into $tmp/rootfs.
mkdir -p "$tmp/rootfs"
facts=$(python3 - "$tmp" <<'EOF'
import json, os, struct, sys, tarfile
d = sys.argv[1]
def blob(digest):
    algo, hexd = digest.split(":", 1)
    return os.path.join(d, "blobs", algo, hexd)
def out(key, value):
    print(f"{key}\t{value}")
index = json.load(open(os.path.join(d, "index.json")))
out("layout", json.load(open(os.path.join(d, "oci-layout"))).get("imageLayoutVersion", ""))
out("manifests", len(index["manifests"]))
desc = index["manifests"][0]
out("ref", desc.get("annotations", {}).get("org.opencontainers.image.ref.name", ""))
manifest = json.load(open(blob(desc["digest"])))
out("manifest_type", manifest.get("mediaType", desc.get("mediaType", "")))
image = json.load(open(blob(manifest["config"]["digest"])))
cfg = image.get("config", {})
out("platform", f'{image.get("os")}/{image.get("architecture")}')
out("user", cfg.get("User", ""))
out("entrypoint", json.dumps(cfg.get("Entrypoint")))
out("cmd", json.dumps(cfg.get("Cmd")))
labels = cfg.get("Labels") or {}
out("label_version", labels.get("org.opencontainers.image.version", ""))
out("label_revision", labels.get("org.opencontainers.image.revision", ""))
out("layers", len(manifest["layers"]))
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"]), "r:*") as t:
        for m in t.getmembers():
            name = m.name.lstrip("./").rstrip("/")
            if not name:
                continue
            kind = "d" if m.isdir() else "l" if m.issym() or m.islnk() else "f" if m.isfile() else "o"
            if name == "ruleplane":
                out("bin_mode", f"{m.mode & 0o7777:04o} {m.uid}:{m.gid}")
            if kind != "d":
                out("file", f"{kind} {name}")
        kw = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
        t.extractall(os.path.join(d, "rootfs"), numeric_owner=True, **kw)
# A static executable has no program interpreter (PT_INTERP, type 3) in its ELF program headers.
with open(os.path.join(d, "rootfs", "ruleplane"), "rb") as f:
    elf = f.read(1 << 16)
if elf[:4] == b"\x7fELF" and elf[4] == 2:
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    types = [struct.unpack_from("<I", elf, phoff + i * phentsize)[0] for i in range(phnum)]
    out("interp", "yes" if 3 in types else "no")
else:
    out("interp", "not an ELF64 file")
EOF
) || { fail "the archive is an OCI image python3 can read"; finish; }
fact() { awk -F '\t' -v k="$1" '$1 == k { print $2 }' <<<"$facts"; }

expect "OCI image layout" "1.0.0" "$(fact layout)"
expect "one image in the archive" "1" "$(fact manifests)"
expect "OCI manifest" "application/vnd.oci.image.manifest.v1+json" "$(fact manifest_type)"
expect "reference name" "ruleplane:$want_version" "$(fact ref)"
expect "platform" "linux/amd64" "$(fact platform)"
expect "user (numeric, so runAsNonRoot can verify it)" "65532:65532" "$(fact user)"
expect "entrypoint" '["/ruleplane"]' "$(fact entrypoint)"
expect "default command" '["run", "--rules=/etc/ruleplane/rules"]' "$(fact cmd)"
expect "version label = workspace version" "$want_version" "$(fact label_version)"
case $(fact label_revision) in
  "" | unknown) fail "revision label set" "got: '$(fact label_revision)'" ;;
  *) ok "revision label set" ;;
esac
expect "one layer" "1" "$(fact layers)"
expect "files: the binary and the user entries, nothing else" "f etc/group,f etc/passwd,f ruleplane" \
  "$(fact file | sort | paste -sd, -)"
shells=$(cd "$tmp/rootfs" && ls -d bin/sh bin/bash bin/busybox bin/ash usr/bin/sh usr/bin/bash 2>/dev/null)
expect "no shell inside" "" "$shells"
expect "binary owned by root, read and execute only" "0555 0:0" "$(fact bin_mode)"
expect "static binary (no ELF interpreter)" "no" "$(fact interp)"
expect "user 65532 in /etc/passwd" "nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin" \
  "$(grep ':65532:' "$tmp/rootfs/etc/passwd" 2>/dev/null)"

# Run the binary from the extracted root filesystem as 65532: in a chroot holding nothing else when root (no
# libc, no /dev, no /proc: less than a container runtime gives), else from the host. What the chart mounts is
# added first: the rules at /etc/ruleplane/rules and a service account directory.
rootfs=$tmp/rootfs
sa=/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$rootfs/etc/ruleplane/rules" "$rootfs$sa"
for f in "$root"/examples/*.yaml; do
  case $f in *.test.yaml) ;; *) cp "$f" "$rootfs/etc/ruleplane/rules/" ;; esac
done
# in_image [VAR=VALUE...] /ruleplane ARG...: only those variables (and HOME) in the environment, like a container.
if [ "$(id -u)" -eq 0 ]; then
  chroot_bin=$(command -v chroot)
  in_image() {
    local vars=(HOME=/nonexistent)
    while [[ $1 == *=* ]]; do vars+=("$1"); shift; done
    # A read-only bind of the root filesystem in a private mount namespace, as readOnlyRootFilesystem gives.
    # shellcheck disable=SC2016 # expanded by the inner sh
    exec unshare --mount -- sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' \
      sh "$rootfs" env -i "${vars[@]}" "$chroot_bin" --userspec=65532:65532 "$rootfs" "$@"
  }
  where="in a read-only chroot as 65532"
else
  in_image() {
    local vars=(HOME=/nonexistent)
    while [[ $1 == *=* ]]; do vars+=("$1"); shift; done
    exec env -i "${vars[@]}" "$rootfs$1" "${@:2}"
  }
  where="(not root: from the host, as $(id -u))"
fi

# `ruleplane 0.1.0 (commit 1a2b3c4d5e6f, Kubernetes 1.35-1.37)`: the commit is known (the build had git).
# shellcheck source=../control-plane/versions.sh
. "$root/tests/control-plane/versions.sh"
window="$(k8s_supported | head -n1 | cut -d. -f1,2 | tr -d v)-$(k8s_supported | tail -n1 | cut -d. -f1,2 | tr -d v)"
version_line=$(in_image /ruleplane --version 2>&1)
case $version_line in
  "ruleplane $want_version (commit unknown,"*) fail "--version names the commit $where" "$version_line" ;;
  "ruleplane $want_version (commit "*", Kubernetes $window)")
    ok "--version $where: $version_line" ;;
  *) fail "--version $where" "want: ruleplane $want_version (commit …, Kubernetes …) | got: $version_line" ;;
esac
if out=$(in_image /ruleplane validate /etc/ruleplane/rules 2>&1); then ok "validate examples/ $where"; else
  fail "validate examples/ $where" "$(tail -3 <<<"$out")"
fi

# The image as a CI step, as docs/testing.md shows it: `podman run -v "$PWD/rules:/rules:ro" IMAGE validate /rules`.
# Arguments after the image replace CMD and keep ENTRYPOINT, so the command is the entrypoint the config names
# followed by them; the rules (tests beside them) are where the volume would put them.
mkdir -p "$rootfs/rules"
cp "$root"/examples/*.yaml "$rootfs/rules/"
read -r -a entrypoint < <(python3 -c 'import json, sys; print(" ".join(json.loads(sys.argv[1])))' "$(fact entrypoint)")
for step in "validate /rules" "test /rules"; do
  # shellcheck disable=SC2086 # the step is words
  if out=$(in_image "${entrypoint[@]}" $step 2>&1); then ok "IMAGE $step (examples mounted) $where"; else
    fail "IMAGE $step (examples mounted) $where" "$(tail -3 <<<"$out")"
  fi
done

# `run` the way the chart does, in-cluster: the API server's address from KUBERNETES_SERVICE_HOST/PORT (an IP, no
# DNS), the service account's token and ca.crt (rustls with that CA; the image has no CA bundle), the
# Leases. Against a private control plane of the repo's own (tests/control-plane), when it is built.
k8s_bin="$cache/k8s/$k8s_version"
if [ "$(id -u)" -ne 0 ]; then
  skipped=$((skipped + 1)); echo "skip run in-cluster: needs root for the chroot"
elif [ ! -x "$k8s_bin/kube-apiserver" ] || [ ! -x "$k8s_bin/kube-controller-manager" ] || [ ! -x "$cache/etcd/usr/bin/etcd" ]; then
  skipped=$((skipped + 1)); echo "skip run in-cluster: no control plane built (make control-plane)"
elif ! "$root/tests/control-plane/cluster.sh" up --dir "$tmp/cluster" --owner-pid $$ --no-controller-manager \
       >/dev/null 2>"$tmp/cluster.log"; then
  fail "a private control plane starts" "$(tail -3 "$tmp/cluster.log")"
else
  cluster=$tmp/cluster
  # shellcheck disable=SC1091
  . "$cluster/env"
  cp "$cluster/certs/ca.crt" "$rootfs$sa/ca.crt"
  printf '%s' "$ADMIN_TOKEN" >"$rootfs$sa/token"
  printf 'default' >"$rootfs$sa/namespace"
  chmod -R a+rX "$rootfs"
  port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  health=$(port) metrics=$(port)
  api=${APISERVER_URL#https://}
  in_image KUBERNETES_SERVICE_HOST="${api%:*}" KUBERNETES_SERVICE_PORT="${api##*:}" POD_NAME=image-check \
    RUST_LOG=info /ruleplane run --rules=/etc/ruleplane/rules --log-format=json \
    --health-probe-bind-address="127.0.0.1:$health" --metrics-bind-address="127.0.0.1:$metrics" \
    >"$tmp/run.log" 2>&1 &
  pid=$!
  get() { python3 -c 'import sys, urllib.request
try: r = urllib.request.urlopen(sys.argv[1], timeout=2); print(r.status); print(r.read().decode())
except Exception as e: print(getattr(e, "code", "none")); print(getattr(e, "read", lambda: str(e).encode())().decode())' "$1"; }
  ready=
  for _ in $(seq 120); do
    ready=$(get "http://127.0.0.1:$health/readyz?verbose")
    [ "$(head -1 <<<"$ready")" = 200 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$(head -1 <<<"$ready")" = 200 ] && kill -0 "$pid" 2>/dev/null; then
    ok "run in-cluster $where: ready (rules loaded, caches synced, leading)"
  else
    fail "run in-cluster $where: ready" "readyz: $(tr '\n' ' ' <<<"$ready"); log: $(tail -3 "$tmp/run.log")"
  fi
  metrics_body=$(get "http://127.0.0.1:$metrics/metrics")
  if [ "$(head -1 <<<"$metrics_body")" = 200 ]; then ok "run in-cluster: /metrics served"; else
    fail "run in-cluster: /metrics served" "$(head -3 <<<"$metrics_body")"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  code=$?
  pid=
  expect "run in-cluster: exits 0 on SIGTERM" "0" "$code"
  "$root/tests/control-plane/cluster.sh" down --dir "$cluster" >/dev/null 2>&1
fi
finish
