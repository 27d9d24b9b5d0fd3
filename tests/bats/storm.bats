#!/usr/bin/env bats
# Storms: many threads, many processes, many control clients at once.
# No lost or stuck notification, no deadlock, content verified, and
# memvisor's memory stays flat (docs/reliability.md has the figures).
#   STORM_SECONDS   how long each storm lasts (default 5; make soak: 60)
#   STORM_THREADS   threads of the mapping storm (default 64)
#   STORM_PROCS     processes of the fork/exec storm (default 200)
#   STORM_CLIENTS   control clients (default 100)

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	SECS=${STORM_SECONDS:-5}
	# A storm that does not end within this is stuck.
	LIMIT=$((SECS * 3 + 60))
}

# memvisor's RSS may not grow by more than this while a storm goes on.
RSS_GROWTH_KB=8192
# memvisor keeps the counters of the last 4,096 exited processes (about
# 6 KiB each) and folds older ones into one aggregate: a fork storm grows
# its memory by up to this until the window is full, then not at all.
EXITED_WINDOW=4096
EXITED_KB=$((EXITED_WINDOW * 8))

# memvisor's RSS, 0 once it has exited.
rss_kb() { proc_kb "$1" VmRSS 2>/dev/null || echo 0; }
seen() { ctl --json status 2>/dev/null | json_get - 'd["processes_seen"]' 2>/dev/null || echo 0; }

# Sample memvisor's RSS from 1 s in until the workload prints DONE-RE in
# $TMP/out (the final --stats-json is not part of the storm), for at most
# LIMIT seconds. Sets EARLY, FULL (when more than EXITED_WINDOW+FULL_AFTER
# processes were seen: the exited window is full), LAST and PEAK (kB).
watch_rss() { # PID DONE-RE [FULL_AFTER]
	local end=$((SECONDS + LIMIT)) r
	sleep 1
	EARLY=$(rss_kb "$1")
	PEAK=$EARLY LAST=$EARLY FULL=
	[ -n "${3:-}" ] || FULL=$EARLY
	while ! grep -q "$2" "$TMP/out"; do
		kill -0 "$1" 2>/dev/null || break
		[ $SECONDS -lt $end ] || { echo "no end after ${LIMIT}s: stuck"; return 1; }
		r=$(rss_kb "$1")
		[ "$r" -gt 0 ] && LAST=$r
		[ "$r" -gt "$PEAK" ] && PEAK=$r
		if [ -z "$FULL" ] && [ "$(seen)" -gt $((EXITED_WINDOW + $3)) ]; then
			FULL=$r
		fi
		sleep 0.3
	done
	local window=
	[ -z "${3:-}" ] || window=", ${FULL:-?} kB when the exited window filled"
	echo "memvisor RSS: ${EARLY} kB after 1 s$window, ${LAST} kB at the end, peak ${PEAK} kB"
}

# Flat: no growth beyond RSS_GROWTH_KB once the exited window is full,
# and no more than the window's worth before.
rss_flat() { # [WINDOW-KB]
	[ -z "${SANITIZER_REPORTS:-}" ] || { echo "ASan build (make asan): freed memory waits in its quarantine, RSS not checked"; return 0; }
	[ $((PEAK - EARLY)) -lt $((RSS_GROWTH_KB + ${1:-0})) ] || return 1
	[ -z "$FULL" ] || [ $((LAST - FULL)) -lt $RSS_GROWTH_KB ]
}

# Every notification was answered and timed: nothing left waiting.
all_answered() { # STATS-JSON
	local n
	n=$(json_get "$1" 'd["notifications"]')
	[ "$n" -gt 0 ]
	[ "$(json_get "$1" 'd["totals"]["service_ns"]["count"]')" -eq "$n" ]
	echo "notifications handled: $n"
}

@test "threads doing mmap/munmap/mremap/mprotect: content verified, every call answered, memory flat" {
	start_bg --notify-all --stats-json "$TMP/s.json" -- "$WL/storm" "${STORM_THREADS:-64}" "$SECS" >"$TMP/out" 2>&1
	watch_rss $MVPID '^storm ok'
	wait $MVPID
	cat "$TMP/out"
	grep -q '^storm ok' "$TMP/out"
	all_answered "$TMP/s.json"
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["mremap"]["allow"]')" -gt 100 ]
	rss_flat
}

@test "processes forking and exec'ing: all exit as expected, all supervised, memory flat" {
	procs=${STORM_PROCS:-200}
	start_bg --stats-json "$TMP/s.json" -- "$WL/forkstorm" "$procs" "$SECS" >"$TMP/out" 2>&1
	watch_rss $MVPID '^forkstorm ok' "$procs"
	wait $MVPID
	cat "$TMP/out"
	spawns=$(awk '/^forkstorm ok/{print $3}' "$TMP/out")
	[ "$spawns" -gt "$procs" ]
	all_answered "$TMP/s.json"
	# Every process was seen: the command, the ones that forked, every
	# exec'd child; and each has an exit status.
	seen=$(json_get "$TMP/s.json" 'd["processes_seen"]')
	echo "processes seen: $seen for $spawns spawns"
	[ "$seen" -ge $((spawns + 1)) ]
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["execve"]["allow"]')" -ge $((spawns + 1)) ]
	[ "$(json_get "$TMP/s.json" 'sum(1 for p in d["processes"] if p["exit_status"] is None)')" -eq 0 ]
	[ -n "$FULL" ] || echo "the exited window did not fill in ${SECS}s: only the bound is checked"
	rss_flat $EXITED_KB
}

@test "control clients hammering status, regions and events during a storm (64 at a time)" {
	mkfifo "$TMP/go" "$TMP/done"
	start_bg --notify-all --stats-json "$TMP/s.json" -- \
		sh -c "read x <'$TMP/go'; '$WL/storm' 8 $SECS; read y <'$TMP/done'" >"$TMP/out" 2>&1
	pid=$(command_pid)
	rss0=$(rss_kb $MVPID)
	echo go >"$TMP/go"
	run timeout $LIMIT python3 "$HELPERS/ctlstorm.py" "$SOCK" "${STORM_CLIENTS:-100}" "$SECS" "$pid"
	assert_success
	assert_output --regexp '^ctlstorm ok [1-9][0-9]* [0-9]+ [0-9]+$'
	# Still answering, with counters that add up.
	wait_for $LIMIT sh -c "grep -q '^storm ok' '$TMP/out'"
	ctl --json status >"$TMP/status.json"
	[ "$(json_get "$TMP/status.json" 'd["processes"]')" -ge 1 ]
	[ "$(json_get "$TMP/status.json" 'd["totals"]["notifications"]')" -gt 0 ]
	rss1=$(rss_kb $MVPID)
	echo "$output; memvisor RSS: $rss0 kB before, $rss1 kB after"
	echo done >"$TMP/done"
	wait $MVPID
	all_answered "$TMP/s.json"
	PEAK=$rss1 EARLY=$rss0 FULL=
	rss_flat
}
