#!/bin/sh
# Runs inside a private mount namespace (unshare --mount --propagation private):
# bind-mounts the Pod's volumes at their mount paths, enters the working directory and
# execs the container's argv. KRT_MOUNTS holds "src<TAB>dst<TAB>ro|rw" lines. For a non-root
# container the argv starts with "setpriv --reuid=... --" (the switch happens after the mounts)
# and KRT_HIDEPID=1 mounts a private /proc that lists only the container user's processes.
set -eu
tab=$(printf '\t')
# Every source is bind-mounted onto a private staging tmpfs first, then from there onto its
# destination: a destination mounted earlier (the container's own /tmp) must not hide the source
# of a later mount (the environment itself may live under /tmp).
stage=/mnt
case "${KRT_MOUNTS:-}" in *"$tab/mnt$tab"* | *"$tab/mnt/"*) stage=/media ;; esac
mount -t tmpfs -o size=1m,mode=0700 krt-stage "$stage"
i=0
while IFS="$tab" read -r src dst mode; do
  [ -n "$src" ] || continue
  i=$((i + 1))
  if [ -d "$src" ]; then mkdir "$stage/$i"; else : > "$stage/$i"; fi
  mount --bind "$src" "$stage/$i"
done <<MOUNTS
${KRT_MOUNTS:-}
MOUNTS
i=0
while IFS="$tab" read -r src dst mode; do
  [ -n "$src" ] || continue
  i=$((i + 1))
  if [ -d "$stage/$i" ]; then
    mkdir -p "$dst"
  else
    mkdir -p "$(dirname "$dst")"
    [ -e "$dst" ] || : > "$dst"
  fi
  mount --bind "$stage/$i" "$dst"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$dst"; fi
done <<MOUNTS
${KRT_MOUNTS:-}
MOUNTS
umount -l "$stage"
unset KRT_MOUNTS
if [ "${KRT_HIDEPID:-}" = 1 ]; then mount -t proc -o hidepid=invisible,nosuid,nodev,noexec proc /proc; fi
unset KRT_HIDEPID
workdir=$1
shift
mkdir -p "$workdir"
cd "$workdir"
exec "$@"
