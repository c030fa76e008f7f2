#!/usr/bin/env bash
# Round 39: the sidecar's CPU while it writes small files, by thread. Needs root (FUSE) and
# redis-server. Mounts a write-back volume (Redis metadata, objects in a local directory, so no
# S3 server takes the CPU), runs 'partfs bench' with 2,000 small files to warm the mount up,
# then with 10,000, and prints the bench's small-file line, the CPU of the Redis client's event
# loop and of the space watch over the mount's life, and the sidecar's CPU during the second
# bench. Everything it starts is stopped and its temp directory removed.
#   benchmarks/results/round39/sidecar-cpu.sh [PARTFS_SCRIPT]      # default: this tree's scripts/partfs
# The sidecar's JVM options can be changed for the mount alone with PARTFS_JAVA_EXTRA_OPTS,
# e.g. PARTFS_JAVA_EXTRA_OPTS=-XX:CompilerDirectivesFile=benchmarks/results/round39/startup-jit-netty/partfs-jit-netty.json
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
P="${1:-$ROOT/scripts/partfs}"
EXTRA="${PARTFS_JAVA_EXTRA_OPTS:-}"
unset PARTFS_JAVA_EXTRA_OPTS
W="$(mktemp -d)"
export PARTFS_HOME="$W/home"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$W/redis" "$W/obj" "$W/mnt"
redis-server --port "$PORT" --save '' --appendonly no --daemonize yes --pidfile "$W/redis.pid" --dir "$W/redis" >/dev/null
cleanup() {
  "$P" umount "$W/mnt" >/dev/null 2>&1 || true
  [[ -f "$W/redis.pid" ]] && kill "$(cat "$W/redis.pid")" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
for _ in $(seq 1 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
META="redis://127.0.0.1:$PORT/1"
"$P" format dev --meta "$META" --storage "file://$W/obj" >/dev/null
out=$(PARTFS_JAVA_EXTRA_OPTS="$EXTRA" "$P" mount "$W/mnt" --background --meta "$META" --writeback --upload-delay 5 2>&1)
pid=$(echo "$out" | grep -o 'pid [0-9]*' | cut -d' ' -f2)
"$P" bench "$W/mnt" --big-file-size 1M --small-file-count 2000 >/dev/null
t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
"$P" bench "$W/mnt" --big-file-size 1M --small-file-count 10000 | grep "Write small"
t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
for t in /proc/"$pid"/task/*; do
  case "$(cat "$t/comm")" in
    lettuce-*Ev*|partfs-space*) echo "  thread $(cat "$t/comm"): $(awk '{printf "%.2f s", ($14+$15)/100}' "$t/stat")" ;;
  esac
done
echo "  sidecar CPU during the 10,000-file bench: $(( (t1 - t0) * 10 )) ms"
