#!/usr/bin/env bash
# bench/checkpoint.sh BUILD_DIR: the checkpoint benchmark (bench/README.md).
#
# One process per case is started under its own memvisor (ckpt_fill: 1 GiB
# written densely, 1 GiB with one page in 16 written, ...), then in every
# round: the raw O_DIRECT write bandwidth of the disk (ckpt_raw -d, same
# size, same directory), then one `memvisor ctl checkpoint DIR --wait` of
# each case. Interleaving keeps the drift of a shared machine out of the
# comparisons; ratios are taken round by round and their medians reported.
# The other raw bandwidths (memcpy, process_vm_readv, crc32c) are measured
# once, before the rounds.
#
# Knobs (environment):
#   CKPT_DIR=DIR      where images go (default: a directory under $TMPDIR);
#                     put it on the disk you want to measure
#   CKPT_MIB=1024     region size
#   CKPT_REPS=5       rounds
#   CKPT_CASES="dense sparse dense_bigbuf"
#                     dense: every page written; sparse: one page in 16;
#                     dense_bigbuf: dense with staging buffers larger than
#                     the data (--buffer), the shortest pause; thp: dense
#                     with transparent huge pages
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${CKPT_MIB:-1024}
REPS=${CKPT_REPS:-5}
CASES=${CKPT_CASES:-dense sparse dense_bigbuf}
. "$(dirname "$0")/lib.sh"
bench_images ckpt bench.img "${CKPT_DIR:-}"
gbps() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }

echo "# memvisor checkpoint benchmark"
echo
echo "command: CKPT_MIB=$MIB CKPT_REPS=$REPS CKPT_CASES=\"$CASES\" $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "host: $(uname -sr), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "images: $DIR ($(df -T "$DIR" | awk 'NR==2 {print $2}'))"
echo

"$BUILD/bench/ckpt_raw" -m "$MIB" "$DIR" >"$T/raw"
raw() { sed -n "s/^$1=//p" "$T/raw" | head -1; }

# Start every case's process, each under its own memvisor and socket.
mkfifo "$T/in"
for c in $CASES; do
	case $c in
	dense | dense_bigbuf) args=(-s 1) ;;
	sparse) args=(-s 16) ;;
	thp) args=(-s 1 -t) ;;
	*) echo "unknown case $c" >&2; exit 2 ;;
	esac
	"$MV" run --socket "$T/$c.sock" -- "$BUILD/bench/ckpt_fill" -m "$MIB" "${args[@]}" \
		<"$T/in" >"$T/out.$c" &
	PIDS+=($!)
done
exec 7>"$T/in"
for c in $CASES; do
	for _ in $(seq 600); do grep -q '^ready' "$T/out.$c" 2>/dev/null && break; sleep 0.1; done
done

checkpoint() { # CASE -> "elapsed pause bytes stop copy sync direct"
	local buf=()
	[ "$1" = dense_bigbuf ] && buf=(--buffer "$((MIB + 64))M")
	rm -rf "$DIR/bench.img"
	"$MV" ctl --socket "$T/$1.sock" --json checkpoint "$DIR/bench.img" --wait "${buf[@]}" \
		>"$T/job.json" 2>/dev/null
	python3 - "$T/job.json" <<-'EOF'
		import json, sys
		r = json.load(open(sys.argv[1]))["result"]
		print(r["elapsed_ns"], r["pause_ns"], r["bytes"], r["stop_ns"], r["copy_ns"], r["sync_ns"], int(r["direct"]))
	EOF
}

# A first checkpoint of each makes the staging buffers (kept after).
for c in $CASES; do checkpoint "$c" >/dev/null; done
for rep in $(seq "$REPS"); do
	"$BUILD/bench/ckpt_raw" -m "$MIB" -d "$DIR" | sed -n "s/^disk_direct=/$rep /p" >>"$T/disk"
	for c in $CASES; do echo "$rep $(checkpoint "$c")" >>"$T/res.$c"; done
done
exec 7>&-

echo "| raw | GB/s |"
echo "|---|---|"
echo "| disk_direct (median of the rounds) | $(gbps "$(awk '{print $2}' "$T/disk" | median)") |"
for k in disk_buffered memcpy_first memcpy_warm memcpy_fresh vm_readv_first vm_readv crc32c; do
	echo "| $k | $(gbps "$(raw $k)") |"
done
echo

col() { awk -v c="$2" '{print $(c + 1)}' "$T/res.$1" | median; }
echo "| case | data | job time ms | dump GB/s | pause ms | stop ms | copy ms | sync ms | O_DIRECT |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $CASES; do
	awk -v c="$c" -v e="$(col "$c" 1)" -v p="$(col "$c" 2)" -v b="$(col "$c" 3)" -v s="$(col "$c" 4)" \
		-v cp="$(col "$c" 5)" -v sy="$(col "$c" 6)" -v d="$(col "$c" 7)" 'BEGIN {
		printf "| %s | %.0f MiB | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %s |\n",
			c, b / 1048576, e / 1e6, b / e, p / 1e6, s / 1e6, cp / 1e6, sy / 1e6, d ? "yes" : "no" }'
done
echo
echo "rounds (disk GB/s; job ms / pause ms per case):"
for rep in $(seq "$REPS"); do
	line="  $rep: disk $(awk -v r="$rep" '$1 == r {printf "%.2f", $2 / 1e9}' "$T/disk")"
	for c in $CASES; do
		line+="; $c $(awk -v r="$rep" '$1 == r {printf "%.0f/%.0f", $2 / 1e6, $3 / 1e6}' "$T/res.$c")"
	done
	echo "$line"
done
echo

# Round by round: the dump rate against the disk's (memcpy is 10x faster
# than either here, so min(disk, memcpy) is the disk), and sparse/dense.
ratio() { # CASE
	join <(sort "$T/disk") <(sort "$T/res.$1") |
		awk '{ print ($5 / $3 * 1e9) / $2 }' | median
}
for c in $CASES; do
	[ "$c" = sparse ] && continue
	awk -v c="$c" -v r="$(ratio "$c")" -v copy="$(raw memcpy_warm)" 'BEGIN {
		printf "%s: dump rate %.0f%% of the disk rate measured in the same round (median of the rounds; memcpy %.1f GB/s; target 90%%)\n",
			c, 100 * r, copy / 1e9 }'
done
if [[ " $CASES " == *" dense "* && " $CASES " == *" sparse "* ]]; then
	s=$(join <(sort "$T/res.dense") <(sort "$T/res.sparse") | awk '{ print $9 / $2 }' | median)
	awk -v s="$s" 'BEGIN { printf "sparse: %.3f of the dense time (median of the rounds; target at most 0.1)\n", s }'
fi
