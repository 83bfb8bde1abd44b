#!/bin/sh
# Runs inside a private mount namespace (unshare --mount --propagation private):
# bind-mounts the Pod's volumes at their mount paths, enters the working directory and
# execs the container's argv. KRT_MOUNTS holds "src<TAB>dst<TAB>ro|rw" lines. For a non-root
# container the argv starts with "setpriv --reuid=... --" (the switch happens after the mounts)
# and KRT_HIDEPID=1 mounts a private /proc that lists only the container user's processes.
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
if [ "${KRT_HIDEPID:-}" = 1 ]; then mount -t proc -o hidepid=invisible,nosuid,nodev,noexec proc /proc; fi
unset KRT_HIDEPID
workdir=$1
shift
mkdir -p "$workdir"
cd "$workdir"
exec "$@"
