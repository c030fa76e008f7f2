#!/usr/bin/env bash
# every 3 s: for each running partfs mount JVM, how many crypto methods at each tier
while true; do
  for p in $(pgrep -f "io.partfs.cli.Main mount"); do
    jcmd $p Compiler.codelist 2>/dev/null | awk -v p=$p '/sun\.security\.provider|com\.sun\.crypto/ {n[$2]++} /SHA2\.implCompress|DigestBase\.implCompressMultiBlock/ {s=s" "$2":"$4} END {printf "%s pid %d crypto by tier: 1:%d 3:%d 4:%d sha:%s\n", strftime("%T"), p, n[1], n[3], n[4], s}'
  done
  sleep 3
done
