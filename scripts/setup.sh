#!/usr/bin/env bash
# Installs what the project needs on a fresh machine of this kind: system packages (apt),
# the project-local Node 22, npm packages and the pinned control plane (Go modules).
# `--kubelet` also installs what the kubelet node kind needs (`krt local up --node=kubelet`,
# docs/kubelet-node.md): its apt packages, then kubelet, containerd and runc (scripts/build-kubelet.sh).
# `make test` passes it (its second phase runs on that kind); `make demo` does not.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
missing=()
for tool in openssl unshare nsenter setpriv git python3; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages for: ${missing[*]}" >&2
  apt-get update -qq && apt-get install -y -qq openssl util-linux git python3 >/dev/null
fi
# OpenSSH (client and server): the devws Git Server's sync fetches ssh repositories with ssh, and
# its tests fetch from a real sshd they start on 127.0.0.1 (e2e/sshd.ts). Never started as a service.
# nss_wrapper: ssh needs a passwd entry, which the Git Server's uid (65532) has not on the local
# environment, whose Pods are host processes (ADR 0036).
ssh_pkgs=()
command -v ssh >/dev/null 2>&1 || ssh_pkgs+=(openssh-client)
[ -x /usr/sbin/sshd ] || ssh_pkgs+=(openssh-server)
compgen -G '/usr/lib/*/libnss_wrapper.so' >/dev/null || ssh_pkgs+=(libnss-wrapper)
if [ ${#ssh_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${ssh_pkgs[*]} (devws ssh repositories and their tests)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${ssh_pkgs[@]}" >/dev/null
fi
# Chromium (Debian's package, never a browser download) for the dashboard's browser tests.
if ! command -v chromium >/dev/null 2>&1; then
  echo "setup: installing chromium (dashboard browser tests)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# Go (>= 1.24) builds the pinned control plane; it comes with machines of this kind.
if ! go version 2>/dev/null | grep -qE 'go1\.(2[4-9]|[3-9][0-9])'; then
  echo "setup: Go 1.24 or newer is required to build the control plane (found: $(go version 2>/dev/null || echo none))" >&2
  exit 1
fi
# PyYAML for the CRD generator check (crds/hack), from PyPI when missing.
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
source scripts/ensure-node.sh
if [ "${CI:-}" = true ] || [ ! -d node_modules/tsx ]; then npm ci --no-audit --no-fund --loglevel=error; fi
bash scripts/build-control-plane.sh >/dev/null
# The dashboard bundle (ui/ → ui/dist/, esbuild, under a second).
npx tsx scripts/build-ui.ts --if-stale
if [ "${1:-}" = --kubelet ]; then
  # libseccomp-dev: runc's seccomp (cgo); containernetworking-plugins: CNI bridge/host-local/portmap;
  # mmdebstrap: the local images' Debian rootfs; gcc + libc6-dev: the static pause binary.
  kubelet_pkgs=(libseccomp-dev pkg-config containernetworking-plugins mmdebstrap gcc libc6-dev iproute2 iptables)
  need=()
  for p in "${kubelet_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing the kubelet node kind's packages: ${need[*]}" >&2
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  bash scripts/build-kubelet.sh >/dev/null
fi
