# The two commands of the README. Everything else is reachable through bin/krt and npm scripts.
.PHONY: demo test test-kubelet down
demo:
	@bash scripts/setup.sh
	@./bin/krt local up --demo
test:
	@bash scripts/test.sh
# Only the second phase of `make test`: selected e2e specs on a real kubelet + containerd + runc (root; docs/kubelet-node.md).
test-kubelet:
	@bash scripts/test-kubelet.sh
down:
	@./bin/krt local down
