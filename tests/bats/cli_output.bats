#!/usr/bin/env bats
# What memvisor prints, for scripts and for people (issue 16): one form
# of times in JSON, human messages without protocol codes, tables that
# stay aligned, --json modes and --no-legend, and output files checked
# before the command runs.

load helpers
bats_require_minimum_version 1.5.0

# The JSON on stdin keeps to docs/protocol.md's "Times and rates".
times_ok() { python3 "$HELPERS/json_times.py"; }

@test "every time in JSON output is integer nanoseconds (*_ns), every rate integer bytes/s" {
	MV_ARGS=(--notify-all --stats-json "$TMP/s.json")
	start_fed "$WL/mappings"
	ctl --json events >"$TMP/events" 7>&- &
	remember_pid $!
	echo "mmap 1114112" >&7
	wait_for 5 grep -q '^asked' "$TMP/out"
	for words in hello status ps "regions $PID" "stats $PID" stats policy jobs; do
		# shellcheck disable=SC2086
		ctl --json $words | times_ok || { echo "ctl $words"; return 1; }
	done
	# A region a logged call made has when it was made.
	ctl --json regions "$PID" >"$TMP/r.json"
	start=$(awk '/^asked/{print $2}' "$TMP/out")
	t=$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$start][0]['created_by']['time_ns']")
	now=$(date +%s%N)
	[ "$t" -gt $((now - 60000000000)) ] && [ "$t" -le "$now" ]
	ctl checkpoint "$TMP/img" --wait --json | times_ok
	ctl --json job 1 | times_ok
	"$MEMVISOR" image verify --json "$TMP/img" | times_ok
	wait_for 5 grep -q '"event":"job"' "$TMP/events"
	times_ok <"$TMP/events"
	stop_fed
	times_ok <"$TMP/s.json"
}

# The times of the finished jobs on stdin (tests/helpers/job_figures.py).
figures_ok() { python3 "$HELPERS/job_figures.py"; }

# Every progress line on stdin that shows a rate was printed 0.2 s or
# more into its job: "19666 MB/s, 0.0 s" is not a rate.
rates_meaningful() {
	awk '/MB\/s/ { if ($NF != "s" || $(NF-1) + 0 < 0.2) { print "too early: " $0; bad = 1 } }
		END { exit bad }'
}

@test "job figures: every duration >= 0, phases within the pause and the job, 'in all' holds the pause; a rate once it means something" {
	skip_unless_uffd
	start_fed "$WL/reload_wl" --file "$TMP/F" --mib 32
	local i=0 how
	for how in "" --live --evict "--evict --live"; do
		i=$((i + 1))
		# shellcheck disable=SC2086
		ctl --json checkpoint "$TMP/img$i" $how --wait >>"$TMP/jobs" 2>>"$TMP/progress"
		run ctl job "$(tail -1 "$TMP/jobs" | json_get - 'd["id"]')"
		assert_success
		echo "checkpoint $how: $output"
		refute_output --regexp " -[0-9]"
		case $how in
		--evict) assert_output --regexp "paused [0-9.]+ ms \(stop [0-9.]+, layout [0-9.]+, copy [0-9.]+, sync [0-9.]+, evict [0-9.]+\)" ;;
		*) assert_output --regexp "paused [0-9.]+ ms \(stop [0-9.]+, layout [0-9.]+, copy [0-9.]+\); synced [0-9.]+ ms after" ;;
		esac
		if [[ $how == --evict* ]]; then
			ctl --json reload "$TMP/img$i" --wait >>"$TMP/jobs" 2>>"$TMP/progress"
			say check '^ok$'
		fi
	done
	figures_ok <"$TMP/jobs"
	[ "$(grep -c '"kind":"reload"' "$TMP/jobs")" -eq 2 ]
	rates_meaningful <"$TMP/progress"
	stop_fed
}

@test "without --notify-all, a mapping no logged call explains was made by null, not by the exec" {
	MV_ARGS=()
	start_fed "$WL/mappings"
	ctl --json regions "$PID" >"$TMP/r.json"
	sparse=$(awk '/^sparse/{print $2}' "$TMP/out")
	# The 1 GiB mmap stayed in the kernel (nothing asks for it): unknown.
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if int(r['start'],16)==0x$sparse][0]['created_by']")" = None ]
	# What the exec itself mapped is still the exec's.
	[ "$(json_get "$TMP/r.json" "[r for r in d['regions'] if r['kind']=='stack'][0]['created_by']['syscall']")" = execve ]
	[ "$(json_get "$TMP/r.json" "[r['created_by']['syscall'] for r in d['regions'] if r['path']=='$WL/mappings'][0]")" = execve ]
	run ctl regions "$PID"
	assert_success
	stop_fed
}

@test "--stats-json to a place that cannot be written stops memvisor (125) before the command runs" {
	for bad in /nonexistent/dir/s.json "$TMP"; do
		rm -f "$TMP/ran"
		run "$MEMVISOR" run --stats-json "$bad" -- touch "$TMP/ran"
		[ "$status" -eq 125 ] || { echo "$bad: status $status: $output"; return 1; }
		assert_output --partial "cannot write --stats-json $bad"
		[ ! -e "$TMP/ran" ] || { echo "$bad: the command ran"; return 1; }
	done
	[ "$(ls -A "$TMP" | grep -c tmp)" -eq 0 ]
	# A good path is written, and nothing is left beside it.
	run "$MEMVISOR" run --stats-json "$TMP/s.json" -- true
	assert_success
	[ "$(json_get "$TMP/s.json" 'd["exit_status"]')" -eq 0 ]
	[ "$(ls -A "$TMP" | grep -v '^run$')" = s.json ]
}

@test "reload and image on a directory that is not an image: 'not a memvisor image (no manifest.json)'" {
	mkdir "$TMP/notimg"
	echo data >"$TMP/notimg/something"
	for cmd in info verify; do
		run "$MEMVISOR" image $cmd "$TMP/notimg"
		[ "$status" -eq 1 ]
		assert_output "memvisor image: $TMP/notimg: not a memvisor image (no manifest.json)"
	done
	start_idle
	run ctl reload "$TMP/notimg"
	[ "$status" -eq 1 ]
	assert_output --partial "$TMP/notimg: not a memvisor image (no manifest.json)"
	refute_output --partial "pages"
	stop_idle
}

# Every row of the table on stdin has its PROT column where the header
# has it: the table stays aligned.
aligned() {
	python3 -c '
import re, sys
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
head, rows = lines[0], lines[1:-1]
at = head.index("PROT")
bad = [r for r in rows if not re.match(r"[r-][w-][x-] ", r[at:at + 4])]
print("\n".join(bad))
sys.exit(1 if bad else 0)'
}

@test "human output: messages without protocol codes, '1 process', no 'done done', 'N ms', an aligned regions table" {
	start_fed "$WL/mappings"
	mkdir "$TMP/notimg"
	run ctl reload "$TMP/notimg"
	[ "$status" -eq 1 ]
	assert_output "memvisor ctl: $TMP/notimg: not a memvisor image (no manifest.json)"
	# Scripts still get the code: with --json the error object on stderr.
	run --separate-stderr ctl --json reload "$TMP/notimg"
	[ "$status" -eq 1 ]
	[ "$(json_get /dev/stdin 'd["code"]' <<<"$stderr")" = invalid ]
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	assert_output --partial "  1 process, 1 thread, "
	refute_output --partial "1 processes"
	refute_output --regexp "[0-9]ms"
	run ctl job 1
	assert_success
	refute_output --partial "done done"
	assert_output --regexp "job 1 checkpoint +done +"
	run "$MEMVISOR" image info "$TMP/img"
	assert_success
	assert_output --partial "contents:  1 process (0 gone), 1 thread, "
	refute_output --regexp "[0-9]ms"
	assert_output --regexp "[0-9] ms  "
	ctl regions "$PID" >"$TMP/table"
	aligned <"$TMP/table"
	grep -q '\[vsyscall\]' /proc/"$PID"/maps || skip "no [vsyscall] mapping here (vsyscall=none)"
	grep -q '\[vsyscall\]' "$TMP/table"
	stop_fed
}

@test "--no-legend: tables without headers and summary lines; ctl policy as text, --json as JSON" {
	policy p '{"version": 1, "rules": [{"name": "big", "syscalls": ["mmap"], "length_min": "4G", "action": "deny", "errno": "ENOMEM"}], "limits": {"max_regions": 5000}}'
	MV_ARGS=(--policy "$TMP/p.json")
	start_fed "$WL/mappings"
	run ctl ps
	assert_line --index 0 --regexp "^ +PID +PPID"
	run ctl ps --no-legend
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	assert_line --index 0 --regexp "^ *$PID "
	count=$(ctl --json regions "$PID" | json_get - 'd["count"]')
	run ctl regions "$PID" --no-legend
	assert_success
	[ "${#lines[@]}" -eq "$count" ]
	refute_output --partial "START"
	refute_output --partial "regions,"
	run ctl --no-legend stats "$PID"
	assert_success
	refute_output --partial "SYSCALL"
	refute_output --partial "service time"
	run ctl --no-legend --list
	assert_success
	refute_output --partial "SOCKET"
	run ctl policy
	assert_success
	assert_line --index 0 --regexp "^policy: +$TMP/p.json \(generation 1, active since [0-9-]+ [0-9:]+\)$"
	assert_output --regexp "big +deny ENOMEM +mmap,mmap2 length_min=4294967296"
	assert_output --partial "limits:      max_regions 5000"
	refute_output --partial "{"
	run ctl policy --json
	[ "$(json_get /dev/stdin 'd["policy"]["rules"][0]["name"]' <<<"$output")" = big ]
	run ctl policy set "$TMP/p.json"
	assert_success
	assert_output "policy $TMP/p.json is active (generation 2)"
	stop_fed
}

@test "ctl events: filtered by --syscall, --tree, --type and --pid; flags shown by name" {
	MV_ARGS=(--notify-all)
	start_fed "$WL/mappings"
	ctl events --syscall mmap >"$TMP/mmap" 7>&- &
	remember_pid $!
	ctl events --tree "$PID" --type=exec,exit >"$TMP/tree" 7>&- &
	remember_pid $!
	ctl events --pid "$PID" --type exit >"$TMP/none" 7>&- &
	remember_pid $!
	ctl --json events --pid "$PID" --type call --syscall mmap,munmap >"$TMP/json" 7>&- &
	remember_pid $!
	sleep 0.5
	echo "mmap 1183744" >&7
	wait_for 5 grep -q '^asked' "$TMP/out"
	echo fork >&7
	wait_for 5 grep -q '^child' "$TMP/out"
	child=$(awk '/^child/{print $2}' "$TMP/out")
	wait_for 5 grep -q 'length=1183744' "$TMP/mmap"
	grep 'length=1183744' "$TMP/mmap" | grep -q "flags=MAP_PRIVATE|MAP_ANONYMOUS "
	# Only mmap calls, of every process.
	[ "$(awk '$3 != "mmap"' "$TMP/mmap" | wc -l)" -eq 0 ] || { cat "$TMP/mmap"; return 1; }
	wait_for 5 grep -q "^[0-9:.]* $child *exec *sleep 300" "$TMP/tree" || { cat "$TMP/tree"; return 1; }
	[ "$(grep -vc ' exec \| exit ' "$TMP/tree")" -eq 0 ] || { cat "$TMP/tree"; return 1; }
	wait_for 5 grep -q '"length":1183744' "$TMP/json"
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    assert e["event"] == "call" and e["syscall"] in ("mmap", "munmap") and e["pid"] == int(sys.argv[2]), e
' "$TMP/json" "$PID"
	# The program did not exit, and its child's exit is not its own.
	[ ! -s "$TMP/none" ]
	run ctl events --pid "$MVPID"
	[ "$status" -eq 1 ]
	assert_output "memvisor ctl: events: process $MVPID is not running under this memvisor (see memvisor ctl --socket $SOCK ps)"
	run ctl events --syscall mmap,mmapp
	[ "$status" -eq 2 ]
	assert_output --partial "events: --syscall: 'mmapp' is not a system call memvisor sees: mmap,"
	run ctl events --type calls
	[ "$status" -eq 2 ]
	assert_output --partial "events: --type: 'calls' is not an event type: call, start, exec"
	run ctl events --tree zero
	[ "$status" -eq 2 ]
	assert_output --partial "--tree: 'zero' is not a process id"
	# memvisor returns once no descendant is left: the child's sleep 300
	# held this test for five minutes.
	kill "$child"
	stop_fed
}
