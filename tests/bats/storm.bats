#!/usr/bin/env bats
# Storms: many threads, many processes, many control clients at once.
# No lost or stuck notification, no deadlock, content verified, and
# memvisor's memory stays flat. STORM_SECONDS (default 4) sets the length;
# `make soak` runs them for 60 s.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	SOCK=$TMP/ctl.sock
	SECS=${STORM_SECONDS:-4}
}
teardown() {
	exec 7>&- 2>/dev/null || true
	teardown_tmp
}

rss_kb() { awk '/^VmRSS/{print $2}' /proc/"$1"/status 2>/dev/null || echo 0; }

# Sample memvisor's RSS from 1 s in until it exits; set EARLY and PEAK (kB).
watch_rss() {
	sleep 1
	EARLY=$(rss_kb "$1")
	PEAK=$EARLY
	while kill -0 "$1" 2>/dev/null; do
		local r
		r=$(rss_kb "$1")
		[ "$r" -gt "$PEAK" ] && PEAK=$r
		sleep 0.2
	done
	echo "memvisor RSS: ${EARLY} kB after 1 s, peak ${PEAK} kB"
}

@test "64 threads of mmap/munmap/mremap/mprotect: every call answered, memory flat" {
	"$MEMVISOR" run --notify-all --socket "$SOCK" --stats-json "$TMP/s.json" -- "$WL/storm" 64 "$SECS" >"$TMP/out" 2>&1 &
	mv=$!
	remember_pid $mv
	wait_for 10 test -S "$SOCK"
	watch_rss $mv
	wait $mv
	grep -q '^storm ok' "$TMP/out"
	# Every notification was answered and timed; nothing left waiting.
	[ "$(json_get "$TMP/s.json" 'd["totals"]["service_ns"]["count"]')" -eq "$(json_get "$TMP/s.json" 'd["notifications"]')" ]
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["mremap"]["allow"]')" -gt 100 ]
	[ $((PEAK - EARLY)) -lt 16384 ]
}

@test "200 processes forking and exec'ing at once are all supervised" {
	run "$MEMVISOR" run --stats-json "$TMP/s.json" -- bash -c '
		for i in $(seq 200); do (/bin/true; exec /bin/echo -n) & done; wait; echo all-done'
	assert_success
	assert_output all-done
	seen=$(json_get "$TMP/s.json" 'd["processes_seen"]')
	[ "$seen" -ge 200 ]
	# Every process is accounted for with an exit status.
	[ "$(json_get "$TMP/s.json" 'sum(1 for p in d["processes"] if p["exit_status"] is None)')" -lt 10 ]
}

@test "a fork storm for a while: memvisor's memory stays flat" {
	[ -z "${SANITIZER_REPORTS:-}" ] || skip "ASan build (make asan): freed memory waits in ASan's quarantine"
	"$MEMVISOR" run --socket "$SOCK" -- bash -c "end=\$((SECONDS + $SECS)); while [ \$SECONDS -lt \$end ]; do for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait; done" &
	mv=$!
	remember_pid $mv
	wait_for 10 test -S "$SOCK"
	watch_rss $mv
	wait $mv
	[ $((PEAK - EARLY)) -lt 16384 ]
}

@test "100 control clients hammering status, regions and events during a storm (64 at a time)" {
	mkfifo "$TMP/go" "$TMP/done"
	"$MEMVISOR" run --notify-all --socket "$SOCK" -- sh -c "read x <'$TMP/go'; '$WL/storm' 8 $SECS; read y <'$TMP/done'" >"$TMP/out" 2>&1 &
	mv=$!
	remember_pid $mv
	wait_for 10 test -S "$SOCK"
	pid=$("$MEMVISOR" ctl --socket "$SOCK" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["command_pid"])')
	echo go >"$TMP/go"
	run python3 "$BATS_TEST_DIRNAME/ctlstorm.py" "$SOCK" 100 "$SECS" "$pid"
	assert_success
	assert_output --regexp '^ctlstorm ok [1-9][0-9]* [0-9]+ [0-9]+$'
	echo done >"$TMP/done"
	wait $mv
	grep -q '^storm ok' "$TMP/out"
}
