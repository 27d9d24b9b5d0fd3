#!/usr/bin/env bash
# bench/cow.sh BUILD_DIR: forked trees across checkpoint, evict and reload
# (bench/README.md, "Fork trees"; issue 15). For each program: the tree's
# Pss and Rss (summed over its processes' smaps_rollup) before, after
# `checkpoint --evict`, and after `reload --wait`; the image's pages file,
# the bytes stored once for several processes (dedup), the pause, and the
# bytes evicted and kept because shared copy-on-write.
#
#   python   bench/cow_pool.py: 1 parent + 8 workers over 256 MiB the
#            parent filled before forking, each worker writing 1 page in 64
#   c_dense  tests/workloads/cow_tree: the same in C
#   c_sparse cow_tree over 1 GiB of which the parent wrote 1 page in 16,
#            then 8 children each writing 1 page in 64
#
# Knobs: COW_CASES="python c_dense c_sparse" COW_DIR (where images go)
set -euo pipefail
export LC_ALL=C
BUILD=${1:-build}
MV=$BUILD/memvisor
CASES=${COW_CASES:-python c_dense c_sparse}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-cow.XXXXXX")
DIR=${COW_DIR:-$T}
trap 'exec 7>&- 2>/dev/null || true; rm -rf "$T" "$DIR/cow.img"' EXIT
here=$(cd "$(dirname "$0")" && pwd)

echo "# memvisor and forked trees"
echo
echo "command: COW_CASES=\"$CASES\" $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

tree() { # FIELD -> MB summed over the tree
	local s=0 p
	for p in $PIDS; do
		s=$((s + $(awk -v f="$1:" '$1 == f {print $2}' "/proc/$p/smaps_rollup")))
	done
	awk -v k="$s" 'BEGIN {printf "%.0f", k / 1000}'
}
mb() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1e6}'; }

echo "| program | processes | Pss before | Rss before | image | stored once (dedup) | pause | evicted | kept (shared c-o-w) | Pss evicted | Pss after reload | Rss after reload |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in $CASES; do
	case $c in
	python) cmd=(python3 "$here/cow_pool.py" 256 8 64) ;;
	c_dense) cmd=("$BUILD/workloads/cow_tree" --mib 256 --children 8 --stride 64) ;;
	c_sparse) cmd=("$BUILD/workloads/cow_tree" --mib 1024 --fill-stride 16 --children 8 --stride 64) ;;
	*) echo "unknown case $c" >&2; exit 2 ;;
	esac
	rm -f "$T/in" "$T/out"
	rm -rf "$DIR/cow.img"
	mkfifo "$T/in"
	"$MV" run --socket "$T/s" -- "${cmd[@]}" <"$T/in" >"$T/out" 2>/dev/null &
	mvp=$!
	exec 7>"$T/in"
	for _ in $(seq 600); do grep -q '^ready' "$T/out" 2>/dev/null && break; sleep 0.1; done
	PIDS=$(awk '/^ready/{for (i = 2; i <= NF; i++) print $i}' "$T/out")
	n=$(echo "$PIDS" | wc -w)
	pss0=$(tree Pss) rss0=$(tree Rss)
	"$MV" ctl --socket "$T/s" --json checkpoint "$DIR/cow.img" --evict --wait 2>/dev/null | tail -1 >"$T/job.json"
	img=$(stat -c %s "$DIR/cow.img/pages")
	read -r ev cow pause dd < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; e=r["evicted"]; print(e["bytes"], e.get("cow_bytes", 0), r["pause_ns"], r.get("dedup", {}).get("bytes", 0))' "$T/job.json")
	pss1=$(tree Pss)
	"$MV" ctl --socket "$T/s" reload "$DIR/cow.img" --wait >/dev/null 2>&1
	pss2=$(tree Pss) rss2=$(tree Rss)
	echo "| $c | $n | $pss0 MB | $rss0 MB | $(mb "$img") MB | $(mb "$dd") MB | $(awk -v p="$pause" 'BEGIN {printf "%.0f", p / 1e6}') ms | $(mb "$ev") MB | $(mb "$cow") MB | $pss1 MB | $pss2 MB | $rss2 MB |"
	echo exit >&7
	exec 7>&-
	wait "$mvp" || true
done
