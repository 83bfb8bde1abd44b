#!/usr/bin/env bash
# Builds the upstream control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) as one multi-call binary from the pinned Go modules in
# scripts/k8s-bin, through the Go module proxy only. The result is cached outside the
# repo, keyed on go.mod + go.sum + main.go + the Go version, so a warm machine never
# rebuilds. Prints the path of the binary directory on stdout (last line).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/k8s-bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath

if ! command -v go >/dev/null 2>&1; then
  echo "build-control-plane: Go is required (apt-get install golang-go or the machine's Go)" >&2
  exit 1
fi

K8S_VERSION=$(sed -n 's#^replace k8s.io/kubernetes => k8s.io/kubernetes \(v[0-9.]*\)$#\1#p' "$src/go.mod")
MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
key=$( (cat "$src/go.mod" "$src/go.sum" "$src/main.go"; go version) | sha256sum | cut -c1-16)
cache_root="${KRUNTIMES_CACHE:-$HOME/.cache/kruntimes}"
out="$cache_root/k8s-bin-$key"

if [ -x "$out/k8s-bin" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$out.tmp"
echo "build-control-plane: building Kubernetes $K8S_VERSION (cold build takes 10-25 minutes on 2 cores)..." >&2
LDF="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$MINOR"
start=$(date +%s)
timefile="$out.tmp/build-time.txt"
( cd "$src" && go mod download >&2 )
if [ -x /usr/bin/time ]; then
  ( cd "$src" && /usr/bin/time -v -o "$timefile" go build -mod=readonly -ldflags "$LDF" -o "$out.tmp/k8s-bin" . ) >&2
else
  ( cd "$src" && go build -mod=readonly -ldflags "$LDF" -o "$out.tmp/k8s-bin" . ) >&2
fi
end=$(date +%s)
echo "wall_seconds=$((end - start))" >> "$timefile"
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  ln -sf k8s-bin "$out.tmp/$c"
done
rm -rf "$out"
mv "$out.tmp" "$out"
echo "build-control-plane: built in $((end - start))s into $out" >&2
echo "$out"
