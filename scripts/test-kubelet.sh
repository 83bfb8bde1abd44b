#!/usr/bin/env bash
# The e2e specs on the kubelet node kind (a real kubelet + containerd + runc, docs/kubelet-node.md):
# `make test-kubelet`, or `bash scripts/test-kubelet.sh e2e/<file>.e2e.ts ...` for other files.
# `make test` runs it after the node-agent suite (scripts/test.sh). It needs root and the kind's
# apt packages, which `scripts/setup.sh --kubelet` installs. Output ends with "N passed, N failed"
# (written to $KRT_SUMMARY_FILE instead when the caller sets it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ "${KRT_TEST_SETUP_DONE:-}" = 1 ] || bash scripts/setup.sh --kubelet
source scripts/ensure-node.sh
KRT_BIN_DIR=$(bash scripts/build-control-plane.sh | tail -n 1); export KRT_BIN_DIR
KRT_KUBELET_BIN_DIR=$(bash scripts/build-kubelet.sh | tail -n 1); export KRT_KUBELET_BIN_DIR
KRT_S3_BIN=$(bash scripts/build-s3-server.sh | tail -n 1); export KRT_S3_BIN
export KRT_NODE_KIND=kubelet
# The specs issue 19 names (security, Runs, Workflows, Extension API, JobClass); docs/kubelet-node.md
# records their results on this kind.
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=(e2e/kubelet/node.kubelet.ts e2e/security/rbac.e2e.ts e2e/security/credentials.e2e.ts
    e2e/security/paths.e2e.ts e2e/runs.e2e.ts e2e/workflows.e2e.ts e2e/aggregation.e2e.ts e2e/jobclass.e2e.ts)
fi
out=${KRT_SUMMARY_FILE:-}
summary=$(mktemp)
set +e
KRT_SUMMARY_FILE="$summary" npx mocha --no-config --node-option import=tsx --extension ts \
  --reporter scripts/mocha-reporter.cjs --timeout 120000 --require e2e/setup.ts "${specs[@]}"
rc=$?
set -e
if [ ! -s "$summary" ]; then echo "0 passed, 1 failed" >"$summary"; rc=1; fi
if [ -n "$out" ]; then cp "$summary" "$out"; else cat "$summary"; fi
rm -f "$summary"
exit $rc
