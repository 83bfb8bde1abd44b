#!/usr/bin/env bash
# Builds the S3-compatible server the artifact-store tests start (versitygw, pinned in
# scripts/s3-server/go.mod), cached (scripts/go-build-cached.sh). Prints the binary's path on its
# last line.
set -euo pipefail
exec bash "$(dirname "$0")/go-build-cached.sh" s3-server versitygw github.com/versity/versitygw/cmd/versitygw
