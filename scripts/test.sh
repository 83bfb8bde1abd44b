#!/usr/bin/env bash
# The whole test suite: type-check, lint, generated-file checks, then unit and e2e tests in
# one mocha run under c8 against a real control plane started for the run (its own
# instance, never the `krt local` one), on the node agent; then the kubelet node kind's subset
# of e2e specs (scripts/test-kubelet.sh: a real kubelet + containerd + runc, docs/kubelet-node.md)
# on a second control plane. KRT_TEST_KUBELET=0 skips that second phase. Output ends with one
# line "N passed, N failed" over both phases; the exit status is non-zero if either failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kubelet_phase=${KRT_TEST_KUBELET:-1}
if [ "$kubelet_phase" = 1 ]; then bash scripts/setup.sh --kubelet; else bash scripts/setup.sh; fi
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
echo "== tests (node agent)"
summary=$(mktemp)
set +e
KRT_SUMMARY_FILE="$summary" npx c8 --reporter=text-summary --reporter=lcov --report-dir=coverage mocha --config .mocharc.json "$@"
rc=$?
set -e
[ -s "$summary" ] || { echo "0 passed, 1 failed" >"$summary"; rc=1; }
echo "node agent phase: $(cat "$summary")"
if [ "$kubelet_phase" = 1 ]; then
  echo "== tests (kubelet node kind: scripts/test-kubelet.sh)"
  summary2=$(mktemp)
  set +e
  KRT_TEST_SETUP_DONE=1 KRT_SUMMARY_FILE="$summary2" bash scripts/test-kubelet.sh
  rc2=$?
  set -e
  [ -s "$summary2" ] || { echo "0 passed, 1 failed" >"$summary2"; rc2=1; }
  echo "kubelet phase: $(cat "$summary2")"
  [ "$rc2" = 0 ] || rc=1
  cat "$summary2" >>"$summary"
  rm -f "$summary2"
fi
# One closing line over both phases: the sums of "N passed, N failed[, N skipped]".
awk -F', ' '{ for (i = 1; i <= NF; i++) { split($i, w, " "); n[w[2]] += w[1] } }
  END { printf "%d passed, %d failed", n["passed"], n["failed"]; if (n["skipped"]) printf ", %d skipped", n["skipped"]; print "" }' "$summary"
rm -f "$summary"
exit $rc
