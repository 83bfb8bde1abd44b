#!/usr/bin/env bash
# Builds one Go command from a pinned module folder under scripts/ through the Go module proxy,
# cached outside the repo like the control plane, keyed on go.mod + go.sum + the Go version, so a
# warm machine never rebuilds. Prints the binary's path on its last line.
#   go-build-cached.sh <folder under scripts/> <binary name> <Go package>
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: go-build-cached.sh <folder> <binary> <package>" >&2; exit 2; }
name=$1 bin=$2 pkg=$3
src="$(cd "$(dirname "$0")" && pwd)/$name"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
key=$( (cat "$src/go.mod" "$src/go.sum"; go version) | sha256sum | cut -c1-16)
out="${KRUNTIMES_CACHE:-$HOME/.cache/kruntimes}/$name-$key"
if [ ! -x "$out/$bin" ]; then
  echo "build-$name: building $bin (first time only)..." >&2
  mkdir -p "$out.tmp"
  (cd "$src" && go build -mod=readonly -ldflags "-s -w" -o "$out.tmp/$bin" "$pkg") >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/$bin"
