#!/usr/bin/env bash
# a write-back mount of its own Redis volume (local objects), N big-file-only bench passes; prints write ms/IO each
# Needs root and redis-server; removes what it made. SMALL, PASSES, BIG, MOUNT_OPTS, STORAGE, HOOK: see the script.
set -u
P=$(cd "$(dirname "$0")/../../.." && pwd)/scripts/partfs
W=$(mktemp -d /tmp/partfs-wb-XXXX); mkdir -p $W/mnt $W/redis
port=$((30000 + RANDOM % 10000))
redis-server --port $port --bind 127.0.0.1 --dir $W/redis --save "" --appendonly no > $W/redis.log 2>&1 & rp=$!
for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
$P format --meta redis://127.0.0.1:$port/1 --storage ${STORAGE:-$W/objects} --home $W/home vol > /dev/null
$P mount --meta redis://127.0.0.1:$port/1 --home $W/home $W/mnt --background --writeback --upload-delay 5 ${MOUNT_OPTS:-} > $W/mount.log 2>&1
sp=$(pgrep -f "io.partfs.cli.Main mount .*$W/mnt" | head -1)
echo "sidecar $sp W $W"
for i in $(seq ${PASSES:-10}); do
  $P bench --big-file-size ${BIG:-256M} --small-file-count ${SMALL:-0} $W/mnt 2>&1 | grep -E "Write big" | awk -F'|' '{printf "%s ", $4}' | sed 's/ms\/IO//g'
  [ -n "${HOOK:-}" ] && eval "$HOOK"
done; echo
$P umount $W/mnt > /dev/null 2>&1
kill $rp; wait $rp 2>/dev/null
rm -rf $W
