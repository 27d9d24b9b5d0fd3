#!/usr/bin/env bats
# `ctl policy` and `ctl policy set FILE` on a running supervisor. These need
# the control socket (supervisor/ctl_*.c); until it exists they skip.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	"$MEMVISOR" ctl --help >/dev/null 2>&1 || skip "memvisor ctl is not built yet"
}
teardown() {
	# A test that failed before finish must not leave its command waiting.
	release_go
	teardown_tmp
}

# Start a command that waits for $TMP/go, then runs "$@"; its output goes to
# $TMP/out and its exit status to $TMP/rc.
start_waiting() { # RUN-OPTIONS... -- CMD...
	local opts=()
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	# bats runs tests under set -e, which the subshell inherits: keep a
	# failing command from ending it before it records the status.
	(
		rc=0
		"$MEMVISOR" run --socket "$SOCK" "${opts[@]}" -- sh -c \
			'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"' "$TMP/go" "$@" >"$TMP/out" 2>&1 || rc=$?
		echo $rc >"$TMP/rc"
	) &
	remember_pid $!
	wait_for 10 test -S "$SOCK"
}

finish() {
	touch "$TMP/go"
	wait_for 20 test -s "$TMP/rc"
	cat "$TMP/out"
	RC=$(cat "$TMP/rc")
}

@test "ctl policy shows the active policy" {
	printf '{"version": 1, "wx": "deny", "limits": {"max_regions": 5000}}\n' >"$TMP/p.json"
	start_waiting --policy "$TMP/p.json" -- true
	run ctl --json policy
	assert_success
	echo "$output" >"$TMP/show.json"
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["source"]')" = "$TMP/p.json" ]
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["policy"]["wx"]')" = deny ]
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["policy"]["limits"]["max_regions"]')" -eq 5000 ]
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["launch"]["until_point"]')" = None ]
	run ctl policy
	assert_success
	assert_output --partial deny
	refute_output --partial until-point
	finish
}

@test "ctl policy says the stop point run --until-point put in the filter" {
	start_waiting --until-point read:0 -- true
	run ctl --json policy
	assert_success
	[ "$(echo "$output" | json_get - 'd.get("result", d)["launch"]["until_point"]')" = read:0 ]
	run ctl policy
	assert_success
	assert_output --partial ", until-point read:0"
	finish
}

@test "ctl policy set: a bad file is refused and the old policy stays" {
	printf '{"version": 1, "rules": [{"syscalls": ["mmap"], "backing": "anon", "length_min": "1M", "action": "deny", "errno": "E2BIG"}]}\n' >"$TMP/p.json"
	printf '{"version": 1, "rules": [{"syscalls": ["mmap"], "action": "deny", "errno": "ENOPE"}]}\n' >"$TMP/bad.json"
	start_waiting --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 2M READ PRIVATE,ANON
	run ctl policy set "$TMP/bad.json"
	assert_failure
	assert_output --partial "$TMP/bad.json:1:"
	assert_output --partial 'unknown errno "ENOPE"'
	run ctl --json policy
	assert_success
	assert_output --partial "$TMP/p.json"
	finish
	[ "$RC" -eq 7 ] # the old rule still holds: E2BIG
}

@test "ctl policy set: a good file takes effect at once" {
	printf '{"version": 1, "rules": [{"syscalls": ["mmap"], "backing": "anon", "length_min": "1M", "action": "deny", "errno": "E2BIG"}]}\n' >"$TMP/p.json"
	printf '{"version": 1, "rules": [{"syscalls": ["mmap"], "backing": "anon", "length_min": "1M", "action": "deny", "errno": "ENOMEM"}]}\n' >"$TMP/new.json"
	start_waiting --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 2M READ PRIVATE,ANON
	run ctl policy set "$TMP/new.json"
	assert_success
	run ctl --json policy
	assert_output --partial "$TMP/new.json"
	finish
	[ "$RC" -eq 12 ]
}

@test "ctl policy set: a change the launch filter cannot deliver is refused clearly" {
	printf '{"version": 1, "wx": "deny"}\n' >"$TMP/wx.json"
	start_waiting -- "$WL/wx_test" rwx-mmap
	run ctl policy set "$TMP/wx.json"
	assert_failure
	assert_output --partial "does not notify what this policy needs"
	assert_output --partial "--notify-all"
	finish
	[ "$RC" -eq 0 ] # still the default policy
}

@test "ctl policy set: W^X turned on at run time is refused, naming the bypasses it would leave open" {
	# --notify-all: the filter notifies everything, but writes to
	# /proc/PID/mem (Landlock) and READ_IMPLIES_EXEC (cleared and guarded)
	# are set up at launch only.
	printf '{"version": 1, "wx": "deny"}\n' >"$TMP/wx.json"
	start_waiting --notify-all -- "$WL/wx_test" rwx-mmap
	run ctl policy set "$TMP/wx.json"
	assert_failure
	assert_output --partial "would leave open"
	assert_output --partial "READ_IMPLIES_EXEC"
	assert_output --partial "/proc/PID/mem"
	finish
	[ "$RC" -eq 0 ] # still the default policy: the RWX mapping was made
}

@test "ctl policy set: W^X log (which refuses nothing) can be turned on at run time" {
	printf '{"version": 1, "wx": "log"}\n' >"$TMP/log.json"
	start_waiting --notify-all -- "$WL/wx_test" rwx-mmap
	run ctl policy set "$TMP/log.json"
	assert_success
	finish
	[ "$RC" -eq 0 ]
}

@test "ctl policy set: W^X deny, relaxed to log and back to deny, is refused (READ_IMPLIES_EXEC was allowed meanwhile)" {
	printf '{"version": 1, "wx": "deny", "wx_mdwe": false}\n' >"$TMP/wx.json"
	printf '{"version": 1, "wx": "log", "wx_mdwe": false}\n' >"$TMP/log.json"
	start_waiting --policy "$TMP/wx.json" -- "$WL/wx_test" rwx-mmap
	run ctl policy set "$TMP/wx.json"
	assert_success # the same deny again: nothing changed
	run ctl policy set "$TMP/log.json"
	assert_success
	run ctl policy set "$TMP/wx.json"
	assert_failure
	assert_output --partial "READ_IMPLIES_EXEC"
	finish
}

@test "ctl policy set: PR_SET_MDWE set at launch cannot be lifted" {
	printf '{"version": 1, "wx": "deny"}\n' >"$TMP/wx.json"
	printf '{"version": 1, "wx": "off"}\n' >"$TMP/off.json"
	start_waiting --policy "$TMP/wx.json" -- true
	"$WL/wx_test" mdwe | grep -q 'mdwe -1' && skip "no PR_SET_MDWE on this kernel"
	run ctl policy set "$TMP/off.json"
	assert_failure
	assert_output --partial "PR_SET_MDWE"
	finish
}

@test "ctl policy set: max_mapped changes RLIMIT_AS of running processes" {
	printf '{"version": 1, "limits": {"max_mapped": "2G"}}\n' >"$TMP/a.json"
	printf '{"version": 1, "limits": {"max_mapped": "1G"}}\n' >"$TMP/b.json"
	start_waiting --policy "$TMP/a.json" -- sh -c 'ulimit -v'
	run ctl policy set "$TMP/b.json"
	assert_success
	finish
	[ "$(cat "$TMP/out")" = 1048576 ]
}
