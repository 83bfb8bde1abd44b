#!/usr/bin/env bash
# Builds what the kubelet node kind (`krt local up --node=kubelet`) runs on top of the control
# plane: kubelet + kube-proxy (one multi-call binary from the same pinned k8s.io/kubernetes
# module as scripts/k8s-bin, own go.mod in scripts/kubelet-bin), containerd 2.x with its runc
# shim and ctr, and runc (cgo + seccomp). Everything comes from the Go module proxy; nothing
# here touches the control plane's build or its cache key, so `make test` never rebuilds
# because of this kind. Each piece is cached on its own key under ~/.cache/kruntimes.
# Needs the kubelet kind's apt packages (scripts/setup.sh --kubelet). Prints the path of a
# directory holding every binary (last line).
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
src="$here/kubelet-bin"
# containerd's version is the one required in scripts/containerd-bin/go.mod.
CONTAINERD_VERSION=$(sed -n 's#^require github.com/containerd/containerd/v2 \(v[0-9.]*\)$#\1#p' "$here/containerd-bin/go.mod")
RUNC_VERSION=v1.3.7
export GOTOOLCHAIN=local GOFLAGS="-trimpath -buildvcs=false"
cache_root="${KRUNTIMES_CACHE:-$HOME/.cache/kruntimes}"
nice_go() { nice -n 10 go "$@"; }

if ! command -v go >/dev/null 2>&1; then
  echo "build-kubelet: Go is required" >&2
  exit 1
fi
gov=$(go version)

# kubelet + kube-proxy, static like upstream's release builds.
build_kubelet() {
  local K8S_VERSION MINOR key out LDF
  K8S_VERSION=$(sed -n 's#^replace k8s.io/kubernetes => k8s.io/kubernetes \(v[0-9.]*\)$#\1#p' "$src/go.mod")
  MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
  key=$( (cat "$src/go.mod" "$src/go.sum" "$src/main.go"; echo "$gov") | sha256sum | cut -c1-16)
  out="$cache_root/kubelet-bin-$key"
  if [ ! -x "$out/kubelet-bin" ]; then
    echo "build-kubelet: building kubelet $K8S_VERSION (a cold build takes several minutes)..." >&2
    LDF="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$MINOR"
    mkdir -p "$out.tmp"
    (cd "$src" && go mod download >&2 && CGO_ENABLED=0 nice_go build -mod=readonly -ldflags "$LDF" -o "$out.tmp/kubelet-bin" .) >&2
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  KUBELET_DIR=$out
}

# A module's commands at a pinned version, built with `go install pkg@version` (the module's
# own go.mod and go.sum, checked against the checksum database by the go command).
build_module() {
  local name=$1 version=$2 cgo=$3 tags=$4 ldflags=$5
  shift 5
  local key out
  key=$( (echo "$name $version $cgo $tags $ldflags $*"; echo "$gov") | sha256sum | cut -c1-16)
  out="$cache_root/$name-$version-$key"
  if [ ! -f "$out/.done" ]; then
    echo "build-kubelet: building $name $version..." >&2
    rm -rf "$out.tmp" && mkdir -p "$out.tmp"
    local pkg
    for pkg in "$@"; do
      CGO_ENABLED=$cgo GOBIN="$out.tmp" nice_go install -tags "$tags" -ldflags "$ldflags" "$pkg@$version" >&2
    done
    touch "$out.tmp/.done"
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# containerd, its runc shim and ctr, from the module in scripts/containerd-bin (containerd's
# go.mod has exclude directives, which `go install pkg@version` refuses).
build_containerd() {
  local mod="$here/containerd-bin" key out
  key=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; echo "$gov") | sha256sum | cut -c1-16)
  out="$cache_root/containerd-$CONTAINERD_VERSION-$key"
  if [ ! -x "$out/ctr" ]; then
    echo "build-kubelet: building containerd $CONTAINERD_VERSION..." >&2
    rm -rf "$out.tmp" && mkdir -p "$out.tmp"
    (cd "$mod" && go mod download >&2 && CGO_ENABLED=0 nice_go build -mod=readonly -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" -o "$out.tmp/" \
      github.com/containerd/containerd/v2/cmd/containerd \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
      github.com/containerd/containerd/v2/cmd/ctr) >&2
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  CONTAINERD_DIR=$out
}

build_kubelet
build_containerd
if ! pkg-config --exists libseccomp 2>/dev/null && [ ! -f /usr/include/seccomp.h ]; then
  echo "build-kubelet: runc needs libseccomp-dev (run: bash scripts/setup.sh --kubelet)" >&2
  exit 1
fi
RUNC_DIR=$(build_module runc "$RUNC_VERSION" 1 "seccomp" "-s -w -X main.version=${RUNC_VERSION#v}" \
  github.com/opencontainers/runc)

# One directory with every binary, keyed on the pieces it links.
key=$(echo "$KUBELET_DIR $CONTAINERD_DIR $RUNC_DIR" | sha256sum | cut -c1-16)
bin="$cache_root/kubelet-node-$key"
if [ ! -x "$bin/runc" ] || [ ! -x "$bin/containerd" ]; then
  mkdir -p "$bin"
  ln -sf "$KUBELET_DIR/kubelet-bin" "$bin/kubelet"
  ln -sf "$KUBELET_DIR/kubelet-bin" "$bin/kube-proxy"
  for c in containerd containerd-shim-runc-v2 ctr; do ln -sf "$CONTAINERD_DIR/$c" "$bin/$c"; done
  ln -sf "$RUNC_DIR/runc" "$bin/runc"
fi
echo "$bin"
