#!/usr/bin/env bash
# Builds the AWS Lambda Runtime Interface Emulator (aws-lambda-rie, pinned in
# scripts/lambda-rie/go.mod) through the Go module proxy, cached outside the repo like the
# control plane. The lambda transport's tests run it in front of aws-lambda-ric. Prints the
# binary's path on its last line.
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)/lambda-rie"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
key=$( (cat "$src/go.mod" "$src/go.sum"; go version) | sha256sum | cut -c1-16)
out="${KRUNTIMES_CACHE:-$HOME/.cache/kruntimes}/lambda-rie-$key"
if [ ! -x "$out/aws-lambda-rie" ]; then
  echo "build-lambda-rie: building aws-lambda-rie (first time only)..." >&2
  mkdir -p "$out.tmp"
  (cd "$src" && go build -mod=readonly -ldflags "-s -w" -o "$out.tmp/aws-lambda-rie" github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie) >&2
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out/aws-lambda-rie"
