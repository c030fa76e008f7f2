#!/usr/bin/env bash
# waits for fs-bench's write-back mount, then prints its write passthrough counter every 2 s
for i in $(seq 900); do
  line=$(pgrep -af "io.partfs.cli.Main mount .*--writeback" | head -1)
  [ -n "$line" ] && break; sleep 0.5
done
port=$(echo "$line" | grep -o -- "--http-address 127.0.0.1:[0-9]*" | cut -d: -f2)
for i in $(seq 12); do
  echo "$(date +%T) $(curl -s http://127.0.0.1:$port/metrics | grep -E '^partfs_fuse_write_passthrough_files_total|^partfs_fuse_passthrough_opens_total' | tr '\n' ' ')"
  sleep 2
done
