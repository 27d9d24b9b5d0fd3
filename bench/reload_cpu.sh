#!/usr/bin/env bash
# bench/reload_cpu.sh BUILD_DIR: what an unthrottled reload costs in CPU
# and how fast it reads, from a cold image (as the checkpoint wrote it,
# with O_DIRECT: not in the page cache) and from a page-cache-resident one
# (read once before), next to the disk's own O_DIRECT read rate of the
# same file, measured in the same round (bench/README.md, "Reload CPU").
#
# Each round: tests/workloads/reload_wl with RCPU_MIB MiB under memvisor,
# `ctl checkpoint --evict`, then `ctl reload --wait` (cold); again with the
# image read once first (warm); then `dd iflag=direct` of a copy of the
# image. Medians of RCPU_REPS rounds.
#
# Knobs: RCPU_MIB=512 RCPU_REPS=3 RCPU_DIR (where images go)
set -euo pipefail
export LC_ALL=C
BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${RCPU_MIB:-512}
REPS=${RCPU_REPS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-rcpu.XXXXXX")
DIR=${RCPU_DIR:-$T}
trap 'exec 7>&- 2>/dev/null || true; rm -rf "$T" "$DIR/rcpu.img" "$DIR/rcpu.copy"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

once() { # warm(0|1) -> "load_s read_rate cpu_per_gib"
	rm -f "$T/in" "$T/out"
	rm -rf "$DIR/rcpu.img"
	mkfifo "$T/in"
	"$MV" run --socket "$T/s" -- "$BUILD/workloads/reload_wl" --mib "$MIB" <"$T/in" >"$T/out" 2>/dev/null &
	local mvp=$!
	exec 7>"$T/in"
	until grep -q ready "$T/out" 2>/dev/null; do sleep 0.1; done
	"$MV" ctl --socket "$T/s" checkpoint "$DIR/rcpu.img" --evict --wait >/dev/null 2>&1
	[ "$1" = 1 ] && cat "$DIR/rcpu.img/pages" >/dev/null
	"$MV" ctl --socket "$T/s" --json reload "$DIR/rcpu.img" --wait 2>/dev/null | tail -1 |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print(r["load_ns"] / 1e9, r["read_rate"], r["cpu_ns_per_gib"] / 1e9)'
	exec 7>&-
	wait "$mvp" || true
}

disk() { # the image's O_DIRECT read rate, bytes/s
	cp "$DIR/rcpu.img/pages" "$DIR/rcpu.copy"
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	dd if="$DIR/rcpu.copy" of=/dev/null bs=2M iflag=direct 2>&1 | awk '/bytes/ {print $(NF-1) * ($NF == "GB/s" ? 1e9 : 1e6)}'
	rm -f "$DIR/rcpu.copy"
}

echo "# reload CPU and read rate, $MIB MiB, $REPS rounds ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg))"
for r in $(seq "$REPS"); do
	once 0 >>"$T/cold"
	once 1 >>"$T/warm"
	disk >>"$T/disk"
done
col() { awk -v c="$2" '{print $c}' "$1" | median; }
echo
echo "| image | load s | read MB/s | of the disk's O_DIRECT read | loader+workers CPU s/GiB |"
echo "|---|---:|---:|---:|---:|"
d=$(median <"$T/disk")
for k in cold warm; do
	awk -v k="$k" -v l="$(col "$T/$k" 1)" -v r="$(col "$T/$k" 2)" -v c="$(col "$T/$k" 3)" -v d="$d" \
		'BEGIN { printf "| %s | %.2f | %.0f | %.0f%% | %.2f |\n", k, l, r / 1e6, 100 * r / d, c }'
done
awk -v d="$d" 'BEGIN { printf "\ndisk O_DIRECT read of the image (dd, median): %.0f MB/s\n", d / 1e6 }'
