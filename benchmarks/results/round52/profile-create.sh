#!/usr/bin/env bash
# Round 52's bisection: partfs bench (1,500 small files) on a write-back mount of its own Redis
# volume (local object directory, --upload-delay 5), with `partfs profile` over 6 s of it, for
# the partfs of a given checkout. Needs root and redis-server; removes what it made.
#   benchmarks/results/round52/profile-create.sh /path/to/checkout TAG   # -> /tmp/profile-TAG.txt, /tmp/bench-TAG.txt
set -u
B=$1; T=$2; P=$B/scripts/partfs
W=$(mktemp -d /tmp/partfs-profile-XXXX); mkdir -p $W/mnt $W/redis
port=$((30000 + RANDOM % 10000)); hp=$((40000 + RANDOM % 10000))
redis-server --port $port --bind 127.0.0.1 --dir $W/redis --save "" --appendonly no > $W/redis.log 2>&1 & rp=$!
for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
$P format --meta redis://127.0.0.1:$port/1 --storage $W/objects --home $W/home vol > /dev/null
$P mount --meta redis://127.0.0.1:$port/1 --home $W/home $W/mnt --background --writeback --upload-delay 5 \
    --http-address 127.0.0.1:$hp > $W/mount.log 2>&1
$P bench --small-file-count 300 --big-file-size 16M $W/mnt > /dev/null 2>&1   # the sidecar's JIT warmed
( $P profile --sidecar 127.0.0.1:$hp --interval 6 --count 1 > /tmp/profile-$T.txt 2>&1 ) &
pp=$!
sleep 0.5
$P bench --small-file-count 1500 --big-file-size 16M $W/mnt > /tmp/bench-$T.txt 2>&1
wait $pp
$P umount $W/mnt > /dev/null 2>&1
kill $rp; wait $rp 2>/dev/null
rm -rf $W
grep -i 'small' /tmp/bench-$T.txt
