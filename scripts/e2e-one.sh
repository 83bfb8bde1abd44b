#!/usr/bin/env bash
# Runs the given e2e spec files (with the shared e2e cluster setup): scripts/e2e-one.sh e2e/runs.e2e.ts
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-node.sh
export KRT_S3_BIN=${KRT_S3_BIN:-$(bash scripts/build-s3-server.sh | tail -n 1)}
export KRT_LAMBDA_RIE_BIN=${KRT_LAMBDA_RIE_BIN:-$(bash scripts/build-lambda-rie.sh | tail -n 1)}
KRT_BIN_DIR=${KRT_BIN_DIR:-$(bash scripts/build-control-plane.sh | tail -n 1)} exec npx mocha --no-config --node-option import=tsx --extension ts \
  --reporter scripts/mocha-reporter.cjs --timeout 120000 --require e2e/setup.ts "$@"
