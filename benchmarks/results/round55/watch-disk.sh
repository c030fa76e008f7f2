#!/usr/bin/env bash
# every second: Dirty and Writeback (MiB), vda MiB written in that second, and write-back sidecar present?
prev=0
while true; do
  w=$(awk '$3=="vda"{print $10}' /proc/diskstats)
  d=$(awk '/^Dirty:/{printf "%d", $2/1024} ' /proc/meminfo); wb=$(awk '/^Writeback:/{printf "%d", $2/1024}' /proc/meminfo)
  s=$(pgrep -f "Main mount .*--writeback" >/dev/null && echo WB || (pgrep -f "Main mount" >/dev/null && echo P || echo -))
  echo "$(date +%T) $s dirty=$d wbk=$wb wrote=$(( (w-prev)*512/1048576 ))"
  prev=$w; sleep 1
done
