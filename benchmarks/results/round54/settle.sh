#!/usr/bin/env bash
# Round 54: how a new write-back mount's small-file costs settle as its JVM compiles the request
# path. A write-back mount of its own Redis volume (local object directory, --upload-delay 5),
# BATCHES partfs bench runs of N small files (default 10 x 150), one line each: write / read / stat
# ms a file; then the sidecar's CPU by thread kind (JIT compilers, the rest). JVM options of the
# mount come from PARTFS_JAVA_EXTRA_OPTS as usual (MOUNT_JAVA_OPTS here, so the bench's own JVM keeps
# its defaults). Needs root and redis-server; removes what it made.
#   MOUNT_JAVA_OPTS="-XX:TieredStopAtLevel=1" benchmarks/results/round54/settle.sh
set -u
P=${B:-$(cd "$(dirname "$0")/../../.." && pwd)}/scripts/partfs
W=$(mktemp -d /tmp/partfs-settle-XXXX); mkdir -p $W/mnt $W/redis
port=$((30000 + RANDOM % 10000))
redis-server --port $port --bind 127.0.0.1 --dir $W/redis --save "" --appendonly no > $W/redis.log 2>&1 & rp=$!
for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
$P format --meta redis://127.0.0.1:$port/1 --storage $W/objects --home $W/home vol > /dev/null
PARTFS_JAVA_EXTRA_OPTS="${MOUNT_JAVA_OPTS:-}" $P mount --meta redis://127.0.0.1:$port/1 --home $W/home $W/mnt \
    --background --writeback --upload-delay 5 > $W/mount.log 2>&1
sp=$(pgrep -f "io.partfs.cli.Main mount .*$W/mnt" | head -1)
for i in $(seq ${BATCHES:-10}); do
  $P bench --big-file-size 0 --small-file-count ${N:-150} $W/mnt 2>&1 | grep -E "Write small|Read small|Stat" \
    | awk -F'|' '{printf "%s ", $4}' | sed 's/ms\/file//g'; echo
done
# methods compiled at each tier when the batches end (1: C1 plain, 2-3: C1 profiling, 4: C2)
jcmd $sp Compiler.codelist 2>/dev/null | awk '$2 ~ /^[0-4]$/ {n[$2]++} END {printf "compiled methods by tier:"; for (t = 1; t <= 4; t++) printf " %d: %d", t, n[t]; print ""}'
hz=$(getconf CLK_TCK)
for t in /proc/$sp/task/*; do
  name=$(cat $t/comm); s=$(cat $t/stat); s=${s##*) }; read -r -a st <<< "$s"
  echo "$name ${st[11]} ${st[12]}"
done | awk -v hz=$hz '{n=$0; sub(/ [0-9]+ [0-9]+$/, "", n); c=($(NF-1)+$NF)/hz;
  if (n ~ /Compiler/) jit+=c; else rest+=c} END {printf "sidecar CPU: JIT %.2f s, other %.2f s\n", jit, rest}'
$P umount $W/mnt > /dev/null 2>&1
kill $rp; wait $rp 2>/dev/null
rm -rf $W
