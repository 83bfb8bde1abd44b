#!/usr/bin/env bash
# Builds the AWS Lambda Runtime Interface Emulator (aws-lambda-rie, pinned in
# scripts/lambda-rie/go.mod), cached (scripts/go-build-cached.sh). The lambda transport's tests
# run it in front of aws-lambda-ric. Prints the binary's path on its last line.
set -euo pipefail
exec bash "$(dirname "$0")/go-build-cached.sh" lambda-rie aws-lambda-rie \
  github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
