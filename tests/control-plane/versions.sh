#!/usr/bin/env bash
# Sourced by the control-plane scripts: resolves the Kubernetes version to use into $k8s_version (e.g. v1.37.2).
# K8S_VERSION (1.36, 1.36.3 or v1.36.3) selects a supported version; the default is the newest (the K8S_VERSION
# file). Supported versions are the modules/<version>/ directories, one Go module per version to build it from.
k8s_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_supported() { (cd "$k8s_here/modules" && ls -d v*/ | tr -d / | sort -V); }
k8s_resolve() { # requested → the supported version it names, or an error listing them
  local want=${1#v} v
  for v in $(k8s_supported); do
    if [ "${v#v}" = "$want" ] || [ "$(echo "${v#v}" | cut -d. -f1,2)" = "$want" ]; then echo "$v"; return; fi
  done
  echo "K8S_VERSION=$1 is not a supported version (supported: $(k8s_supported | tr '\n' ' '))" >&2
  return 1
}
k8s_version=$(k8s_resolve "${K8S_VERSION:-$(cat "$k8s_here/K8S_VERSION")}")
