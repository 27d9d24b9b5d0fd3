#!/usr/bin/env bash
# bench/criu.sh BUILD_DIR: memvisor and CRIU side by side on the same
# workload, round by round (bench/README.md, "Against CRIU").
#
# The workload is bench/lazy_touch: MIB MiB of private memory, one page
# in STRIDE written with a pattern, driven by signals (CRIU dumps and
# restores it: it holds no pipe and no file). For each size in CRIU_MIBS
# and each stride in CRIU_STRIDES, CRIU_REPS rounds, each:
#
#   CRIU      a fresh copy is dumped (`criu dump`, which ends it), its
#             images synced (CRIU does not make them durable) and dropped
#             from the page cache; then `criu lazy-pages` and `criu
#             restore --lazy-pages`: the copy runs again while the daemon
#             serves its faults and pushes the rest of its pages.
#   memvisor  a copy under memvisor is checkpointed (`ctl checkpoint
#             --wait`: durable when the job ends), evicted (`checkpoint
#             --evict`), its image dropped from the page cache; then
#             `ctl reload` loads it back while the copy runs and faults.
#
# Right after the restore (CRIU) or the reload's start (memvisor) the copy
# touches CRIU_TOUCHES random written pages one by one and times each:
# the first-touch latency as the program sees it, while the rest is
# pushed. Reported, medians of the rounds:
#   pause      the program stopped for the image: CRIU's frozen_time
#              (stats-dump); memvisor's pause_ns
#   durable    from the request to an image on disk: dump + sync; the
#              checkpoint job
#   down       CRIU: the program did not run from the dump's start to the
#              restore's end (the dump ends it); memvisor: the evict's
#              pause (the program runs during a reload)
#   touch      first-touch p50 / p99 (us)
#   all pages  from the restore (reload) request until every page is back:
#              the lazy-pages daemon exits; the reload job ends
#   CPU        CPU seconds of the lazy-pages daemon; of memvisor over the
#              reload
# Each round ends with the copy reading every page back (a lost byte
# fails the benchmark).
#
# CRIU must work here: `criu check` first, else skipped with its reason.
# Debian 12's CRIU 3.17.1 fails on Linux 6.13 and later ([vvar_vclock]);
# CRIU 4.1 and later work (built from the upstream repository). CRIU=PATH picks one.
#
# Knobs: CRIU_MIBS="256 1024" CRIU_STRIDES="1 16" CRIU_REPS=3
#        CRIU_TOUCHES=1000 CRIU_DIR (where images go). Needs root.
set -euo pipefail
export LC_ALL=C

BUILD=${1:-build}
MV=$BUILD/memvisor
PROG=$BUILD/bench/lazy_touch
MIBS=${CRIU_MIBS:-256 1024}
STRIDES=${CRIU_STRIDES:-1 16}
REPS=${CRIU_REPS:-3}
TOUCHES=${CRIU_TOUCHES:-1000}
CRIU=${CRIU:-$(command -v criu || true)}

echo "# memvisor and CRIU"
echo
echo "command: CRIU_MIBS=\"$MIBS\" CRIU_STRIDES=\"$STRIDES\" CRIU_REPS=$REPS CRIU_TOUCHES=$TOUCHES $0 $*"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(uname -sr), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if [ -z "$CRIU" ]; then
	echo "skipped: criu is not installed (CRIU 4.1 or later, built from upstream)"
	exit 0
fi
echo "criu: $CRIU, $("$CRIU" --version | head -1)"
if [ "$(id -u)" != 0 ]; then
	echo "skipped: CRIU needs root"
	exit 0
fi
if ! out=$("$CRIU" check 2>&1); then
	echo "skipped: \`criu check\` fails on this kernel:"
	echo "$out" | grep -m3 -i error | sed 's/^/    /'
	exit 0
fi
CRIT=$(dirname "$CRIU")/crit
[ -x "$CRIT" ] || CRIT=$(command -v crit || true)

T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-criu.XXXXXX")
DIR=${CRIU_DIR:-$T/images}
mkdir -p "$DIR"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T" "$DIR"/criu.img "$DIR"/mv.img
}
trap cleanup EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", (b - a) * 1000}'; }
wait_line() { # FILE PATTERN: up to 120 s
	for _ in $(seq 1200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	echo "timed out waiting for '$2' in $1" >&2
	return 1
}
drop_cache() { sync; echo 1 >/proc/sys/vm/drop_caches; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of a process
touch_cols() { awk '/^touch/{print $4, $6}' "$1" | tail -1; } # p50 p99
check_ok() { # OUT PID: ask for a check, wait for it
	local n
	n=$(grep -c '^check' "$1" || true)
	kill -USR2 "$2"
	for _ in $(seq 1200); do [ "$(grep -c '^check' "$1" || true)" -gt "$n" ] && break; sleep 0.1; done
	tail -1 "$1" | grep -q '^check ok' || { echo "the copy's memory changed: $(tail -1 "$1")" >&2; return 1; }
}

criu_round() { # MIB STRIDE -> "pause durable down p50 p99 all cpu"
	local out=$T/criu.out t0 dump durable t1 restore frozen all cpu pid
	rm -rf "$DIR/criu.img" "$out" "$T/restored.pid" && mkdir -p "$DIR/criu.img"
	# Not a job of this shell: the dump ends it.
	(setsid "$PROG" "$1" "$2" "$out" "$TOUCHES" </dev/null >/dev/null 2>&1 &)
	wait_line "$out" '^ready'
	pid=$(awk '/^ready/{print $2}' "$out")
	t0=$(now)
	"$CRIU" dump -t "$pid" -D "$DIR/criu.img" -o dump.log >/dev/null 2>&1 || {
		echo "criu dump failed; dump.log ends:" >&2
		tail -5 "$DIR/criu.img/dump.log" >&2
		return 1
	}
	dump=$(ms_since "$t0")
	# The restore needs its pid back: the dumped copy must be reaped.
	for _ in $(seq 1000); do [ -e "/proc/$pid" ] || break; sleep 0.01; done
	sync
	durable=$(ms_since "$t0")
	frozen=$("$CRIT" decode -i "$DIR/criu.img/stats-dump" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["entries"][0]["dump"]["frozen_time"] / 1000)')
	drop_cache
	# The daemon first, and the restore once its socket is there.
	t1=$(now)
	(
		TIMEFORMAT='%U %S'
		{ time "$CRIU" lazy-pages -D "$DIR/criu.img" -o lazy.log >/dev/null 2>&1; } 2>"$T/lazy.cpu"
	) &
	local lp=$!
	for _ in $(seq 200); do [ -S "$DIR/criu.img/lazy-pages.socket" ] && break; sleep 0.01; done
	"$CRIU" restore -D "$DIR/criu.img" --lazy-pages -d --pidfile "$T/restored.pid" -o restore.log \
		>/dev/null 2>&1 || {
		echo "criu restore failed; restore.log ends:" >&2
		tail -5 "$DIR/criu.img/restore.log" >&2
		kill $lp
		return 1
	}
	restore=$(ms_since "$t1")
	pid=$(cat "$T/restored.pid")
	PIDS+=("$pid")
	kill -USR1 "$pid"
	wait $lp || true
	all=$(ms_since "$t1")
	cpu=$(awk '{print $1 + $2}' "$T/lazy.cpu")
	wait_line "$out" '^touch'
	check_ok "$out" "$pid"
	kill -9 "$pid"
	echo "$frozen $durable $(awk -v a="$dump" -v b="$restore" 'BEGIN {print a + b}') $(touch_cols "$out") $all $cpu"
}

mv_round() { # -> "pause durable down p50 p99 all cpu"
	local out=$T/mv.out.$MIB.$STRIDE c0 c1 hz ev
	rm -rf "$DIR/mv.img"
	"$MV" ctl --socket "$T/mv.sock" --json checkpoint "$DIR/mv.img" --wait >"$T/ckpt.json" 2>/dev/null
	rm -rf "$DIR/mv.img"
	"$MV" ctl --socket "$T/mv.sock" --json checkpoint "$DIR/mv.img" --evict --wait >"$T/evict.json" 2>/dev/null
	drop_cache
	hz=$(getconf CLK_TCK)
	c0=$(cpu_ticks "$MVPID")
	local n
	n=$(grep -c '^touch' "$out" || true)
	"$MV" ctl --socket "$T/mv.sock" --json reload "$DIR/mv.img" >"$T/reload.start.json" 2>/dev/null
	kill -USR1 "$WPID"
	local id
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$T/reload.start.json")
	"$MV" ctl --socket "$T/mv.sock" --json job "$id" --wait >"$T/reload.json" 2>/dev/null
	c1=$(cpu_ticks "$MVPID")
	for _ in $(seq 1200); do [ "$(grep -c '^touch' "$out" || true)" -gt "$n" ] && break; sleep 0.1; done
	check_ok "$out" "$WPID"
	python3 - "$T/ckpt.json" "$T/evict.json" "$T/reload.json" "$(touch_cols "$out")" \
		"$(awk -v a="$c0" -v b="$c1" -v hz="$hz" 'BEGIN {print (b - a) / hz}')" <<-'EOF'
		import json, sys
		last = lambda f: json.loads(open(f).read().splitlines()[-1])
		c = last(sys.argv[1])["result"]
		e = last(sys.argv[2])["result"]
		r = last(sys.argv[3])  # the job: its elapsed_ns (the result has none)
		p50, p99 = sys.argv[4].split()
		print(c["pause_ns"] / 1e6, c["elapsed_ns"] / 1e6, e["pause_ns"] / 1e6, p50, p99,
		      r["elapsed_ns"] / 1e6, sys.argv[5])
	EOF
}

printf '| MiB | written | tool | pause ms | durable ms | down ms | touch p50 us | p99 us | all pages ms | MB/s | CPU s |\n'
printf '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for MIB in $MIBS; do
	for STRIDE in $STRIDES; do
		# The copy under memvisor, for every round of this size.
		out=$T/mv.out.$MIB.$STRIDE
		"$MV" run --socket "$T/mv.sock" -- "$PROG" "$MIB" "$STRIDE" "$out" "$TOUCHES" \
			</dev/null >/dev/null 2>&1 &
		MVPID=$!
		PIDS+=("$MVPID")
		wait_line "$out" '^ready'
		WPID=$(awk '/^ready/{print $2}' "$out")
		: >"$T/res.criu"
		: >"$T/res.mv"
		for rep in $(seq "$REPS"); do
			if [ $((rep % 2)) = 1 ]; then
				criu_round "$MIB" "$STRIDE" >>"$T/res.criu"
				mv_round >>"$T/res.mv"
			else
				mv_round >>"$T/res.mv"
				criu_round "$MIB" "$STRIDE" >>"$T/res.criu"
			fi
		done
		kill "$WPID"
		wait "$MVPID" || true
		bytes=$(((MIB << 20) / STRIDE))
		for t in criu mv; do
			col() { awk -v c="$1" '{print $c}' "$T/res.$t" | median; }
			name=$([ "$t" = criu ] && echo "CRIU dump, restore --lazy-pages" || echo "memvisor checkpoint, evict, reload")
			all=$(col 6)
			printf '| %s | %s | %s | %.1f | %.0f | %.0f | %s | %s | %.0f | %.0f | %.2f |\n' "$MIB" \
				"$([ "$STRIDE" = 1 ] && echo dense || echo "1 page in $STRIDE")" "$name" \
				"$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)" "$all" \
				"$(awk -v b="$bytes" -v t="$all" 'BEGIN {print (t > 0 ? b / (t / 1000) / 1e6 : 0)}')" \
				"$(col 7)"
		done
	done
done
echo
echo "pause: the program stopped for the image (CRIU: frozen_time). durable: the image on disk (CRIU: dump + sync)."
echo "down: CRIU ends the program at the dump and runs it again at the restore; memvisor stops it for the evict only."
echo "touch: the program's first touches of random pages right after the restore / the reload's start."
echo "all pages: until the lazy-pages daemon exits / the reload job ends; MB/s = written bytes / that time."
echo "CPU: the lazy-pages daemon; memvisor (every thread) over the reload."
