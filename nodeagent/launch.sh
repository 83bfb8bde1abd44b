#!/bin/sh
# Runs inside a private mount namespace (unshare --mount --propagation private):
# bind-mounts the Pod's volumes at their mount paths, enters the working directory and
# execs the container's argv. KRT_MOUNTS holds "src<TAB>dst<TAB>ro|rw" lines.
set -eu
tab=$(printf '\t')
while IFS="$tab" read -r src dst mode; do
  [ -n "$src" ] || continue
  if [ -d "$src" ]; then
    mkdir -p "$dst"
  else
    mkdir -p "$(dirname "$dst")"
    [ -e "$dst" ] || : > "$dst"
  fi
  mount --bind "$src" "$dst"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$dst"; fi
done <<MOUNTS
${KRT_MOUNTS:-}
MOUNTS
unset KRT_MOUNTS
workdir=$1
shift
mkdir -p "$workdir"
cd "$workdir"
exec "$@"
