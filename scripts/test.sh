#!/usr/bin/env bash
# The whole test suite: type-check, lint, generated-file checks, then unit and e2e tests in
# one mocha run under c8 against a real control plane started for the run (its own
# instance, never the `krt local` one). Output ends with "N passed, N failed".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
source scripts/ensure-node.sh
echo "node $(node --version), npm $(npm --version)"

echo "== type-check"; npx tsc --noEmit -p . && npx tsc --noEmit -p ui
echo "== format"; npx prettier --check --log-level=warn .
echo "== lint"; npx eslint .
echo "== control plane"; KRT_BIN_DIR=$(bash scripts/build-control-plane.sh | tail -n 1); export KRT_BIN_DIR
KRT_S3_BIN=$(bash scripts/build-s3-server.sh | tail -n 1); export KRT_S3_BIN
KRT_LAMBDA_RIE_BIN=$(bash scripts/build-lambda-rie.sh | tail -n 1); export KRT_LAMBDA_RIE_BIN
echo "== generated files are current"
(cd scripts/k8s-bin && GOTOOLCHAIN=local go mod download k8s.io/kubernetes k8s.io/api k8s.io/apimachinery)
python3 crds/hack/generate.py --check
npx tsx scripts/gen-types.ts --check
npx tsx scripts/gen-manifests.ts --check
npx tsx lib/opensandbox/gen.ts --check
echo "== tests"
summary=$(mktemp)
set +e
KRT_SUMMARY_FILE="$summary" npx c8 --reporter=text-summary --reporter=lcov --report-dir=coverage mocha --config .mocharc.json "$@"
rc=$?
set -e
if [ ! -s "$summary" ]; then echo "0 passed, 1 failed"; exit 1; fi
cat "$summary"
rm -f "$summary"
exit $rc
