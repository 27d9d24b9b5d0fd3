#!/usr/bin/env bash
# bench/checkpoint.sh BUILD_DIR: the checkpoint benchmark (bench/README.md).
#
# In one run: the raw bandwidths of the disk and the CPU (ckpt_raw), then
# `memvisor ctl checkpoint DIR --wait` of a process holding 1 GiB written
# densely and 1 GiB with one page in 16 written (ckpt_fill), each case
# repeated, reporting medians of the job's time, dump rate and pause.
#
# Knobs (environment):
#   CKPT_DIR=DIR      where images go (default: a directory under $TMPDIR);
#                     put it on the disk you want to measure
#   CKPT_MIB=1024     region size
#   CKPT_REPS=5       repetitions of each case
#   CKPT_CASES="dense sparse"  (also: thp, dense with huge pages; dense_bigbuf,
#                     dense with staging buffers larger than the data)
#   CKPT_BUFFER=...   staging buffer for the job (ctl checkpoint --buffer)
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${CKPT_MIB:-1024}
REPS=${CKPT_REPS:-5}
CASES=${CKPT_CASES:-dense sparse}
T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-ckpt.XXXXXX")
DIR=${CKPT_DIR:-$T/images}
mkdir -p "$DIR"
MVPID=
cleanup() {
	exec 7>&- 2>/dev/null || true
	[ -n "$MVPID" ] && wait "$MVPID" 2>/dev/null || true
	rm -rf "$T" "$DIR"/bench.img
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

echo "# memvisor checkpoint benchmark"
echo
echo "command: CKPT_MIB=$MIB CKPT_REPS=$REPS CKPT_CASES=\"$CASES\"${CKPT_BUFFER:+ CKPT_BUFFER=$CKPT_BUFFER} $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "host: $(uname -sr), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "images: $DIR ($(df -T "$DIR" | awk 'NR==2 {print $2}'))"
echo

# Raw bandwidths, on the same disk, in the same run: before, between and
# after the cases (this machine is shared; the median is used).
raw_sample() { "$BUILD/bench/ckpt_raw" -m "$MIB" "$DIR" >>"$T/raw"; }
raw() { sed -n "s/^$1=//p" "$T/raw" | median; }
raws() { sed -n "s/^$1=//p" "$T/raw" | awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e9}'; }
gbps() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }
raw_sample

run_case() { # NAME FILL-ARGS...
	local name=$1
	shift
	mkfifo "$T/in.$name"
	"$MV" run --socket "$T/mv.sock" -- "$BUILD/bench/ckpt_fill" -m "$MIB" "$@" <"$T/in.$name" >"$T/out.$name" &
	MVPID=$!
	exec 7>"$T/in.$name"
	for _ in $(seq 100); do grep -q '^ready' "$T/out.$name" && break; sleep 0.1; done
	: >"$T/res.$name"
	for _ in $(seq "$REPS"); do
		rm -rf "$DIR/bench.img"
		"$MV" ctl --socket "$T/mv.sock" --json checkpoint "$DIR/bench.img" --wait \
			${CKPT_BUFFER:+--buffer "$CKPT_BUFFER"} >"$T/job.json" 2>/dev/null
		python3 - "$T/job.json" >>"$T/res.$name" <<-'EOF'
			import json, sys
			r = json.load(open(sys.argv[1]))["result"]
			print(r["elapsed_ns"], r["pause_ns"], r["bytes"], r["stop_ns"], r["copy_ns"], r["sync_ns"], int(r["direct"]))
		EOF
	done
	exec 7>&-
	wait "$MVPID"
	MVPID=
	rm -f "$T/mv.sock"
}

col() { awk -v c="$2" '{print $c}' "$T/res.$1" | median; }

for c in $CASES; do
	case $c in
	dense) run_case dense -s 1 ;;
	sparse) run_case sparse -s 16 ;;
	thp) run_case thp -s 1 -t ;;
	dense_bigbuf) CKPT_BUFFER=$((MIB + 64))M run_case dense_bigbuf -s 1 ;;
	esac
	[ "$c" = dense ] && raw_sample
done
raw_sample

echo "| raw (median of the samples) | GB/s | samples |"
echo "|---|---|---|"
for k in disk_direct disk_buffered memcpy_first memcpy_warm memcpy_fresh vm_readv_first vm_readv crc32c; do
	echo "| $k | $(gbps "$(raw $k)") | $(raws $k) |"
done
echo

dense_ms=
echo "| case | data | job time ms | dump GB/s | pause ms | stop ms | copy ms | sync ms | O_DIRECT |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $CASES; do
	e=$(col "$c" 1) p=$(col "$c" 2) b=$(col "$c" 3) s=$(col "$c" 4) cp=$(col "$c" 5) sy=$(col "$c" 6) d=$(col "$c" 7)
	[ "$c" = dense ] && dense_ms=$(awk -v e="$e" 'BEGIN {print e / 1e6}')
	awk -v c="$c" -v e="$e" -v p="$p" -v b="$b" -v s="$s" -v cp="$cp" -v sy="$sy" -v d="$d" 'BEGIN {
		printf "| %s | %.0f MiB | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %s |\n",
			c, b / 1048576, e / 1e6, b / e, p / 1e6, s / 1e6, cp / 1e6, sy / 1e6, d ? "yes" : "no" }'
done
echo
echo "samples (job ms / pause ms):"
for c in $CASES; do
	echo "  $c: $(awk '{printf "%s%.0f/%.0f", (NR > 1 ? " " : ""), $1 / 1e6, $2 / 1e6}' "$T/res.$c")"
done
echo
disk=$(raw disk_direct) copy=$(raw memcpy_warm)
for c in $CASES; do
	[ "$c" = dense ] || continue
	awk -v e="$(col dense 1)" -v b="$(col dense 3)" -v disk="$disk" -v copy="$copy" 'BEGIN {
		floor = disk < copy ? disk : copy
		rate = b / e * 1e9
		printf "dense: %.2f GB/s = %.0f%% of min(disk %.2f, memcpy %.2f) GB/s (target 90%%)\n",
			rate / 1e9, 100 * rate / floor, disk / 1e9, copy / 1e9 }'
done
if [ -n "$dense_ms" ] && [[ " $CASES " == *" sparse "* ]]; then
	awk -v d="$dense_ms" -v s="$(col sparse 1)" 'BEGIN {
		printf "sparse: %.1f ms = %.3f of the dense time (target at most 0.1)\n", s / 1e6, (s / 1e6) / d }'
fi
