#!/usr/bin/env bash
# waits for fs-bench's write-back mount, then reports which processes wrote to disk over 14 s, and the disk's own counters
snap() { for p in /proc/[0-9]*; do w=$(awk '/^write_bytes/ {print $2}' $p/io 2>/dev/null); [ -n "$w" ] && [ "$w" != 0 ] && echo "${p#/proc/} $w $(tr '\0' ' ' < $p/cmdline 2>/dev/null | cut -c1-80)"; done; }
for i in $(seq 900); do pgrep -f "io.partfs.cli.Main mount .*--writeback" >/dev/null && break; sleep 0.5; done
sleep 2
snap > /tmp/r54/io-a.txt; d0=$(awk '$3=="vda" {print $10}' /proc/diskstats)
sleep 14
snap > /tmp/r54/io-b.txt; d1=$(awk '$3=="vda" {print $10}' /proc/diskstats)
echo "vda sectors written: $(( (d1 - d0) / 2048 )) MiB in 14 s"
join <(sort -k1,1 /tmp/r54/io-a.txt | awk '{print $1, $2}') <(sort -k1,1 /tmp/r54/io-b.txt) | awk '{d=($3-$2)/1048576; if (d > 1) {printf "%8.1f MiB pid %s", d, $1; for (i=4;i<=NF;i++) printf " %s", $i; print ""}}' | sort -rn | head
