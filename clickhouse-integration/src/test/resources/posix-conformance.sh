#!/usr/bin/env bash
# POSIX behaviour a filesystem controls, printed so that two runs can be compared line by
# line: one on a directory of the kernel's own filesystem (ext4), one on a PartFS mount.
# Each line is an operation and its outcome (exit status and the error text, with the
# directory replaced by $D), or a stat of names, link counts, modes, owners, sizes and
# whether timestamps moved. Run as root; "as nobody" steps use setpriv.
# Usage: posix-conformance.sh DIR   (DIR must be empty)
set -u
D="$1"
cd "$D" || exit 2
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

run() {  # run CMD...: prints "CMD => status: error text"
  local out rc
  out=$("$@" 2>&1); rc=$?
  out=${out//$D/\$D}
  printf '%s => %d %s\n' "$*" "$rc" "$(printf '%s' "$out" | head -1)"
}
st() {   # st NAME...: type mode nlink uid gid size (size of directories left out)
  local n
  for n in "$@"; do
    if [[ -d $n && ! -L $n ]]; then
      printf 'stat %s: %s\n' "$n" "$(stat -c '%F %a nlink=%h uid=%u gid=%g' "$n" 2>&1)"
    else
      printf 'stat %s: %s\n' "$n" "$(stat -c '%F %a nlink=%h uid=%u gid=%g size=%s' "$n" 2>&1)"
    fi
  done
}
tick() { sleep 0.02; }  # kernel timestamps of ext4 are coarse: make changes distinguishable
times() { stat -c '%.9X %.9Y %.9Z' "$1"; }   # atime mtime ctime
moved() {  # moved NAME BEFORE: which of atime/mtime/ctime changed since BEFORE
  local a b c a0 b0 c0
  read -r a b c <<<"$(times "$1")"; read -r a0 b0 c0 <<<"$2"
  printf 'times %s: atime %s mtime %s ctime %s\n' "$1" \
    "$([[ $a == "$a0" ]] && echo same || echo changed)" \
    "$([[ $b == "$b0" ]] && echo same || echo changed)" \
    "$([[ $c == "$c0" ]] && echo same || echo changed)"
}

echo "== create and mkdir"
run mkdir d; st d
run mkdir d
run mkdir -m 0700 private; st private
run touch f; st f
run mkdir d/sub; st d
run mkfifo fifo; st fifo
run mknod chr c 1 3; st chr; stat -c 'chr rdev %t:%T' chr
run touch "$(printf 'n%.0s' {1..255})"
run touch "$(printf 'n%.0s' {1..256})"
run bash -c 'set -C; echo x > f'

echo "== hard links"
run ln f g; st f g
run link d dd
run ln f g
run unlink g; st f
run unlink d

echo "== symlinks"
run ln -s some/target lnk; st lnk; readlink lnk
run ln -s d dlink; run touch dlink/through; st d/through
run chown -h 65534:65534 lnk; stat -c 'lnk owner %u:%g' lnk; stat -c 'target dir owner %u:%g' d

echo "== rename"
echo one > a; echo two > b
run mv -T a b; cat b; st b
mkdir e1 e2; run mv -T e1 e2; st e2
mkdir full; touch full/x; run mv -T e2 full
mkdir -p p1/c; mkdir p2; st p1 p2
run mv p1/c p2/c; st p1 p2 p2/c
run mv -T f f; st f

echo "== remove"
run rmdir full
run rmdir f
run rm full/x; run rmdir full
run rmdir full

echo "== modes and owners"
touch m; run chmod 4755 m; st m
run chown 65534:65534 m; st m
run chmod 2755 m; st m
run chmod 0644 m; st m
run chown :65534 m; st m
mkdir sg; chown :65534 sg; chmod 2775 sg
run touch sg/f; st sg/f
run mkdir sg/sub; st sg/sub

echo "== permissions (as nobody)"
mkdir locked; chmod 0755 locked
run "${NOBODY[@]}" touch locked/x
mkdir -m 1777 sticky; touch sticky/rootfile
run "${NOBODY[@]}" touch sticky/mine; st sticky/mine
run "${NOBODY[@]}" rm -f sticky/rootfile
run "${NOBODY[@]}" rm -f sticky/mine
run "${NOBODY[@]}" chmod 0777 f
touch shared; chmod 0666 shared
run "${NOBODY[@]}" touch shared
run "${NOBODY[@]}" touch -d @1000000000 shared
run "${NOBODY[@]}" cat private/../f
run "${NOBODY[@]}" ls private

echo "== truncate and sizes"
run truncate -s 100 f; st f
run truncate -s 0 f; st f
printf 'abcdef' > t; run truncate -s 3 t; run truncate -s 5M t; st t
head -c 3 t; echo; tail -c +4 t | cmp -s - <(head -c $((5*1024*1024 - 3)) /dev/zero) && echo "t: zeros after the cut"

echo "== timestamps"
touch ts; tick
b=$(times ts); run touch -m -d @1000000000.5 ts; stat -c 'ts mtime %.9Y' ts; moved ts "$b"
b=$(times ts); tick; run touch -a -d @1200000000.25 ts; stat -c 'ts atime %.9X' ts; moved ts "$b"
b=$(times ts); tick; run chmod 0600 ts; moved ts "$b"
b=$(times ts); tick; echo more >> ts; moved ts "$b"
b=$(times ts); tick; run truncate -s 2 ts; moved ts "$b"
b=$(times ts); tick; cat ts > /dev/null; moved ts "$b"
mkdir tdir; b=$(times tdir); tick; run touch tdir/new; moved tdir "$b"
b=$(times tdir); tick; run mv tdir/new tdir/new2; moved tdir "$b"
b=$(times tdir/new2); tick; run mv tdir/new2 tdir/new3; moved tdir/new3 "$b"
b=$(times tdir/new3); tick; run ln tdir/new3 tdir/l; moved tdir/new3 "$b"
b=$(times tdir); tick; run rm tdir/l; moved tdir "$b"
b=$(times tdir/new3); tick; run chown 65534 tdir/new3; moved tdir/new3 "$b"

echo "== final tree"
find . -mindepth 1 -printf '%y %m %n %P\n' | LC_ALL=C sort
