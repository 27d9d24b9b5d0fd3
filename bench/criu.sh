#!/usr/bin/env bash
# bench/criu.sh BUILD_DIR: memvisor and CRIU side by side on the same
# workload, round by round (bench/README.md, "Against CRIU").
#
# The workload is bench/ckpt_fill: CRIU_MIB MiB of private memory written
# densely, then idle. In each round:
#   dump        `criu dump --leave-running` of a native copy, then sync(1)
#               (CRIU does not make its image durable): the pause is
#               CRIU's frozen_time (stats-dump), the durable time is dump
#               plus sync;
#   checkpoint  `memvisor ctl checkpoint` of a copy under memvisor (its
#               image is durable when the job ends): pause_ns, elapsed_ns;
#   lazy        `criu lazy-pages` + `criu restore --lazy-pages` of the
#               dump: time until the lazy-pages daemon has sent every page
#               and exits (the restored process is then killed);
#   reload      `memvisor ctl checkpoint --evict`, then `reload --wait`:
#               time to all pages, from the reload's result.
# Rates are bytes over those times. Medians of CRIU_REPS rounds.
#
# CRIU must work here: `criu check` is run first, and the benchmark is
# skipped with its reason when it fails. Debian 12's CRIU 3.17.1 fails on
# Linux 6.13 and later (the [vvar_vclock] mapping: "Failed to fill self
# vdso symtable"); CRIU 4.1 has the fix.
#
# Knobs: CRIU_MIB=1024 CRIU_REPS=3 CRIU_DIR (where images go). Needs root.
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
MIB=${CRIU_MIB:-1024}
REPS=${CRIU_REPS:-3}

echo "# memvisor and CRIU"
echo
echo "command: CRIU_MIB=$MIB CRIU_REPS=$REPS $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if ! command -v criu >/dev/null; then
	echo "skipped: criu is not installed (Debian package criu)"
	exit 0
fi
echo "criu: $(criu --version | head -1)"
if [ "$(id -u)" != 0 ]; then
	echo "skipped: CRIU needs root"
	exit 0
fi
if ! out=$(criu check 2>&1); then
	echo "skipped: \`criu check\` fails on this kernel:"
	echo "$out" | grep -m3 -i error | sed 's/^/    /'
	exit 0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-criu.XXXXXX")
DIR=${CRIU_DIR:-$T/images}
mkdir -p "$DIR"
PIDS=()
cleanup() {
	exec 7>&- 8>&- 2>/dev/null || true
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T" "$DIR"/criu.img "$DIR"/mv.img
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", (b - a) * 1000}'; }

# The copy under memvisor, and the native one CRIU dumps (its own session,
# so that it has no terminal: no --shell-job needed).
mkfifo "$T/in.mv" "$T/in.native"
"$MV" run --socket "$T/mv.sock" -- "$BUILD/bench/ckpt_fill" -m "$MIB" -s 1 <"$T/in.mv" >"$T/out.mv" &
PIDS+=($!)
exec 7>"$T/in.mv"
setsid "$BUILD/bench/ckpt_fill" -m "$MIB" -s 1 <"$T/in.native" >"$T/out.native" 2>/dev/null &
PIDS+=($!)
exec 8>"$T/in.native"
for c in mv native; do
	for _ in $(seq 600); do grep -q '^ready' "$T/out.$c" 2>/dev/null && break; sleep 0.1; done
done
NATIVE=$(awk '/^ready/{print $2}' "$T/out.native")

criu_round() { # -> "pause_ms dump_ms durable_ms lazy_ms"
	local t0 dump durable t1 lazy frozen
	rm -rf "$DIR/criu.img" && mkdir -p "$DIR/criu.img"
	t0=$(now)
	criu dump -t "$NATIVE" -D "$DIR/criu.img" --leave-running -o dump.log >/dev/null 2>&1 ||
		{ echo "criu dump failed: $DIR/criu.img/dump.log" >&2; return 1; }
	dump=$(ms_since "$t0")
	sync
	durable=$(ms_since "$t0")
	frozen=$(crit decode -i "$DIR/criu.img/stats-dump" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"][0]["dump"]["frozen_time"] / 1000)')
	# Lazy restore: the daemon serves the pages, and exits once it has
	# sent them all; the restored copy is then killed.
	t1=$(now)
	criu lazy-pages -D "$DIR/criu.img" -o lazy.log >/dev/null 2>&1 &
	local lp=$!
	criu restore -D "$DIR/criu.img" --lazy-pages -d --pidfile "$T/restored.pid" -o restore.log \
		>/dev/null 2>&1 || { echo "criu restore failed: $DIR/criu.img/restore.log" >&2; kill $lp; return 1; }
	wait $lp || true
	lazy=$(ms_since "$t1")
	kill -9 "$(cat "$T/restored.pid")" 2>/dev/null || true
	echo "$frozen $dump $durable $lazy"
}

mv_round() { # -> "pause_ms job_ms durable_ms reload_ms"
	rm -rf "$DIR/mv.img"
	"$MV" ctl --socket "$T/mv.sock" --json checkpoint "$DIR/mv.img" --wait >"$T/ckpt.json" 2>/dev/null
	rm -rf "$DIR/mv.img"
	"$MV" ctl --socket "$T/mv.sock" --json checkpoint "$DIR/mv.img" --evict --wait >/dev/null 2>&1
	"$MV" ctl --socket "$T/mv.sock" --json reload "$DIR/mv.img" --wait >"$T/reload.json" 2>/dev/null
	python3 - "$T/ckpt.json" "$T/reload.json" <<-'EOF'
		import json, sys
		c = json.loads(open(sys.argv[1]).read().splitlines()[-1])["result"]
		r = json.loads(open(sys.argv[2]).read().splitlines()[-1])["result"]
		print(c["pause_ns"] / 1e6, c["elapsed_ns"] / 1e6, c["elapsed_ns"] / 1e6, r["elapsed_ns"] / 1e6)
	EOF
}

for rep in $(seq "$REPS"); do
	if [ $((rep % 2)) = 1 ]; then
		criu_round >>"$T/res.criu"
		mv_round >>"$T/res.mv"
	else
		mv_round >>"$T/res.mv"
		criu_round >>"$T/res.criu"
	fi
done

col() { awk -v c="$2" '{print $c}' "$T/res.$1" | median; }
rate() { awk -v m="$MIB" -v t="$1" 'BEGIN {printf "%.0f", t > 0 ? m * 1048576 / (t / 1000) / 1e6 : 0}'; }
echo "$MIB MiB written densely; medians of $REPS rounds (the order alternates)"
echo
echo "| | pause ms | checkpoint ms | durable ms | time to all pages ms | MB/s to all pages |"
echo "|---|---:|---:|---:|---:|---:|"
for t in criu mv; do
	name=$([ "$t" = criu ] && echo "CRIU dump / restore --lazy-pages" || echo "memvisor checkpoint / evict+reload")
	printf "| %s | %.1f | %.0f | %.0f | %.0f | %s |\n" "$name" "$(col $t 1)" "$(col $t 2)" "$(col $t 3)" \
		"$(col $t 4)" "$(rate "$(col $t 4)")"
done
