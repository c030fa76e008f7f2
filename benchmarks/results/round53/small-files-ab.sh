#!/usr/bin/env bash
# Round 53: partfs bench small files (no big file) on local disk and on a write-back mount of its
# own Redis volume (local object directory, --upload-delay 5), COUNTS files a pass, for the
# checkout B (default: this one). Needs root and redis-server; removes what it made.
#   B=/path/to/checkout DIRS=@W/mnt COUNTS="100 100 100 100 1500" benchmarks/results/round53/small-files-ab.sh
set -u
P=${B:-$(cd "$(dirname "$0")/../../.." && pwd)}/scripts/partfs
W=$(mktemp -d /tmp/partfs-stat-XXXX); mkdir -p $W/mnt $W/redis $W/local
port=$((30000 + RANDOM % 10000)); hp=$((40000 + RANDOM % 10000))
redis-server --port $port --bind 127.0.0.1 --dir $W/redis --save "" --appendonly no > $W/redis.log 2>&1 & rp=$!
for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
$P format --meta redis://127.0.0.1:$port/1 --storage $W/objects --home $W/home vol > /dev/null
$P mount --meta redis://127.0.0.1:$port/1 --home $W/home $W/mnt --background --writeback --upload-delay 5 \
    --http-address 127.0.0.1:$hp ${EXTRA:-} > $W/mount.log 2>&1
DIRS=${DIRS:-"$W/local $W/mnt"}; DIRS=${DIRS//@W/$W}
for n in $COUNTS; do
  for d in $DIRS; do
    echo "== $n $d"; $P bench --big-file-size 0 --small-file-count $n $d 2>&1 | grep -E "Stat|small"
  done
done
$P umount $W/mnt > /dev/null 2>&1
kill $rp; wait $rp 2>/dev/null
rm -rf $W
