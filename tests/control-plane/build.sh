#!/usr/bin/env bash
# Builds (once per version, K8S_VERSION: see versions.sh) kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the pinned k8s.io/kubernetes module and
# fetches etcd 3.5 from Debian's etcd-server package, builds helm (chart tests) and KWOK (the kubelet stand-in for
# labelled nodes); all in the user's cache.
# Prints the directory holding the binaries on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"
version=$k8s_version
module="$here/modules/$version"
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
bin="$cache/k8s/$version"
log() { printf '[control-plane] %s\n' "$*" >&2; }

build_kube() {
  local b missing=0
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do [ -x "$bin/$b" ] || missing=1; done
  [ $missing = 1 ] || return 0
  command -v go >/dev/null || { log "Go toolchain not found: install Go >= $(awk '$1=="go"{print $2}' "$module/go.mod")"; exit 1; }
  local major=${version#v}; major=${major%%.*}
  local minor=${version#v*.}; minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  log "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $version with Go (first time only; ~10-20 min on 2 cores)..."
  local tmp; tmp=$(mktemp -d "$cache/k8s/.build.XXXXXX")
  local start=$SECONDS
  # A heartbeat so a human watching 'make demo' sees progress instead of silence.
  ( while sleep 30; do log "  still compiling ($((SECONDS - start)) s so far)..."; done ) &
  local beat=$!
  trap 'kill $beat 2>/dev/null || true' RETURN
  (cd "$module" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod \
     GOMODCACHE="${GOMODCACHE:-$cache/go-mod}" GOCACHE="${GOCACHE:-$cache/go-build}" \
     go build -trimpath -o "$tmp/" \
       -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
       k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
       k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
  mkdir -p "$bin"
  mv "$tmp/kube-apiserver" "$tmp/kube-controller-manager" "$tmp/kube-scheduler" "$tmp/kubectl" "$bin/"
  rmdir "$tmp"
  log "built in $((SECONDS - start)) s: $bin"
}

fetch_etcd() {
  if [ -x "$cache/etcd/usr/bin/etcd" ]; then return; fi
  log "fetching etcd 3.5 from Debian's etcd-server package (sid), unpacked into the cache only..."
  local apt="$cache/apt"
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/etc/preferences.d" "$apt/etc/apt.conf.d"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  local mirror
  # The machine's own Debian mirror (whatever apt is configured with), never a hard-coded host.
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
           | grep -oE 'https?://[^ ]+/debian/?( |$)' | tr -d ' ' | awk 'NR==1') || true
  [ -n "$mirror" ] || { log "cannot find a Debian mirror in /etc/apt sources"; exit 1; }
  echo "deb [signed-by=$keyring] $mirror sid main" > "$apt/etc/sources.list"
  local opts=(-o Dir::Etc::SourceList="$apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o Dir::Etc::Preferences="$apt/etc/preferences" -o Dir::Etc::PreferencesParts="$apt/etc/preferences.d"
              -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o Dir::State::Status=/dev/null
              -o Debug::NoLocking=1)
  apt-get "${opts[@]}" update -qq >&2
  local ver
  ver=$(apt-cache "${opts[@]}" madison etcd-server | awk -F'|' '{gsub(/ /,"",$2); print $2}' | grep -E '^3\.5\.' | head -n1)
  [ -n "$ver" ] || { log "no etcd-server 3.5.x found in Debian sid"; exit 1; }
  (cd "$apt/archives" && apt-get "${opts[@]}" download "etcd-server=$ver" >&2)
  rm -rf "$cache/etcd.tmp" && mkdir -p "$cache/etcd.tmp"
  dpkg-deb -x "$apt/archives"/etcd-server_*.deb "$cache/etcd.tmp"
  rm -rf "$cache/etcd" && mv "$cache/etcd.tmp" "$cache/etcd"
  log "etcd $("$cache/etcd/usr/bin/etcd" --version | head -n1)"
}

build_helm() {
  local helm_version; helm_version=$(cat "$here/HELM_VERSION")
  local dir="$cache/helm/$helm_version"
  if [ ! -x "$dir/helm" ]; then
    log "building helm $helm_version with Go (first time only; a few minutes)..."
    (cd "$cache" && GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$dir" \
       GOMODCACHE="${GOMODCACHE:-$cache/go-mod}" GOCACHE="${GOCACHE:-$cache/go-build}" \
       go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$helm_version")
  fi
  ln -sf "$dir/helm" "$bin/helm"
}

# KWOK plays the kubelet for nodes labelled ruleplane.dev/kwok=true (docs/control-plane.md). It is its own Go
# module (its k8s.io modules are newer than the plane's pins), so it is installed like helm. Its stages (what it does
# to nodes and pods) are the module's own "fast" stages plus the Lease heartbeat, gathered from the downloaded
# module into one config file next to the binary.
build_kwok() {
  local kwok_version; kwok_version=$(cat "$here/KWOK_VERSION")
  local dir="$cache/kwok/$kwok_version"
  if [ ! -x "$dir/kwok" ]; then
    log "building kwok $kwok_version with Go (first time only; a few minutes)..."
    (cd "$cache" && GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$dir" \
       GOMODCACHE="${GOMODCACHE:-$cache/go-mod}" GOCACHE="${GOCACHE:-$cache/go-build}" \
       go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version")
  fi
  if [ ! -s "$dir/stages.yaml" ]; then
    local src="${GOMODCACHE:-$cache/go-mod}/sigs.k8s.io/kwok@$kwok_version/kustomize/stage" f
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      [ -f "$src/$f" ] || { log "kwok stage $f not found in $src"; exit 1; }
      printf -- '---\n'; cat "$src/$f"
    done > "$dir/stages.yaml.tmp"
    mv "$dir/stages.yaml.tmp" "$dir/stages.yaml"
  fi
  ln -sf "$dir/kwok" "$bin/kwok"
  ln -sf "$dir/stages.yaml" "$bin/kwok-stages.yaml"
}

mkdir -p "$cache/k8s"
fetch_etcd
build_kube
ln -sf "$cache/etcd/usr/bin/etcd" "$bin/etcd"
build_helm
build_kwok
echo "$bin"
