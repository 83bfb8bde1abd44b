#!/usr/bin/env bash
# Builds the S3-compatible server the artifact-store tests start (versitygw, pinned in
# scripts/s3-server/go.mod) through the Go module proxy, cached outside the repo like the
# control plane. Prints the binary's path on its last line.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/s3-server"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
key=$( (cat "$src/go.mod" "$src/go.sum"; go version) | sha256sum | cut -c1-16)
out="${KRUNTIMES_CACHE:-$HOME/.cache/kruntimes}/s3-server-$key"
if [ ! -x "$out/versitygw" ]; then
  echo "build-s3-server: building versitygw (first time only)..." >&2
  mkdir -p "$out.tmp"
  (cd "$src" && go build -mod=readonly -ldflags "-s -w" -o "$out.tmp/versitygw" github.com/versity/versitygw/cmd/versitygw) >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/versitygw"
