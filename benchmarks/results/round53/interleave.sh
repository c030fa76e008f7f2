#!/usr/bin/env bash
# Round 53: two builds mounted at once, each on its own Redis (write-back, --upload-delay 5, local
# object directory), warmed by 300 small files, then ROUNDS x (a 100-file partfs bench on A, one on
# B), PAUSE s (2) before each: write, read and stat ms a file, one line a pass. Needs root, redis-server.
#   A=/path/to/checkout1 B=/path/to/checkout2 ROUNDS=12 benchmarks/results/round53/interleave.sh
set -u
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
W=$(mktemp -d /tmp/partfs-il-XXXX)
declare -A RP
for t in A B; do
  b=${!t}; P=$b/scripts/partfs
  mkdir -p $W/$t/mnt $W/$t/redis
  port=$((30000 + RANDOM % 10000))
  redis-server --port $port --bind 127.0.0.1 --dir $W/$t/redis --save "" --appendonly no > $W/$t/redis.log 2>&1 & RP[$t]=$!
  for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  $P format --meta redis://127.0.0.1:$port/1 --storage $W/$t/objects --home $W/$t/home vol > /dev/null
  $P mount --meta redis://127.0.0.1:$port/1 --home $W/$t/home $W/$t/mnt --background --writeback --upload-delay 5 > $W/$t/mount.log 2>&1
  $P bench --big-file-size 0 --small-file-count 300 $W/$t/mnt > /dev/null 2>&1
done
for t in A B; do echo -n "" > $W/$t.res; done
for i in $(seq $ROUNDS); do
  for t in A B; do
    b=${!t}
    sleep ${PAUSE:-2}
    $HERE/scripts/partfs bench --big-file-size 0 --small-file-count 100 $W/$t/mnt 2>&1 | grep -E "Write small|Read small|Stat" | awk -F'|' '{printf "%s ", $4}' | sed 's/ms\/file//g' >> $W/$t.res
    echo >> $W/$t.res
  done
done
for t in A B; do echo "## $t = ${!t}"; cat $W/$t.res; done
for t in A B; do ${!t}/scripts/partfs umount $W/$t/mnt > /dev/null 2>&1; kill ${RP[$t]}; wait ${RP[$t]} 2>/dev/null; done
rm -rf $W
