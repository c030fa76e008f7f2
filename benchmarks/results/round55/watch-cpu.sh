#!/usr/bin/env bash
# every 3 s: CPU% (since last sample) of every java/redis process, by pid and role; for write-back sidecar also top threads
hz=$(getconf CLK_TCK)
declare -A last
while true; do
  now=$(date +%s.%N)
  out="$(date +%T)"
  for p in $(pgrep -f "java|redis-server"); do
    [ -r /proc/$p/stat ] || continue
    s=$(cat /proc/$p/stat 2>/dev/null) || continue; s=${s##*) }; read -r -a st <<< "$s"
    t=$((st[11]+st[12]))
    cmd=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)
    role=other
    case "$cmd" in *"Main mount"*--writeback*) role=wb;; *"Main mount"*) role=mnt;; *FsBench*|*startup*) role=stack;; *redis-server*) role=redis;; *"Main bench"*) role=bench;; esac
    if [ -n "${last[$p]:-}" ]; then d=$((t-last[$p])); out="$out $role:$p=$d"; fi
    last[$p]=$t
  done
  echo "$out"
  sleep 3
done
