#!/usr/bin/env bats
# What a new user sees (issue 28): state shown rather than nothing, the
# user's words rather than the protocol's, and mistakes named.

load helpers
bats_require_minimum_version 1.5.0

@test "ctl jobs: a title, and a line saying there is none" {
	start_idle
	run ctl jobs
	assert_success
	assert_output "jobs: none (checkpoint and reload start one)"
	run ctl jobs --no-legend
	assert_success
	assert_output ""
	ctl checkpoint "$TMP/img" --wait >/dev/null
	run ctl jobs
	assert_success
	assert_line --index 0 "jobs:"
	assert_line --index 1 --regexp "^  job 1 checkpoint +done "
	stop_idle
}

@test "ctl errors in the user's words: the operand or --option, not args.KEY; --json keeps the pointer" {
	start_idle
	run ctl job 99
	[ "$status" -eq 1 ]
	assert_output "memvisor ctl: no job 99"
	run ctl checkpoint "$TMP/img" --buffer 1K
	[ "$status" -eq 1 ]
	assert_output "memvisor ctl: --buffer: between 16 MiB and 16 GiB"
	run --separate-stderr ctl --json job 99
	[ "$status" -eq 1 ]
	[ "$(json_get /dev/stdin 'd["message"]' <<<"$stderr")" = "args.id: no job 99" ]
	# `call` speaks the protocol: its errors keep the protocol's names.
	run ctl call job '{"id": 99}'
	[ "$status" -eq 1 ]
	assert_output "memvisor ctl: args.id: no job 99"
	stop_idle
}

@test "ctl -n NAME that is not running lists the names that are" {
	for n in alpha beta; do
		mkfifo "$TMP/go.$n"
		"$MEMVISOR" run -n $n -- sh -c "read x <'$TMP/go.$n'" </dev/null &
		remember_pid $!
		eval "pid_$n=\$!"
	done
	wait_for 10 test -S "$XDG_RUNTIME_DIR/memvisor/alpha.sock"
	wait_for 10 test -S "$XDG_RUNTIME_DIR/memvisor/beta.sock"
	run "$MEMVISOR" ctl -n nosuch ps
	[ "$status" -ne 0 ]
	assert_line --index 0 --partial "no running memvisor is named nosuch"
	assert_line --index 1 --regexp "^memvisor ctl: running: (alpha, beta|beta, alpha)$"
	echo go >"$TMP/go.alpha"
	echo go >"$TMP/go.beta"
	wait "$pid_alpha" "$pid_beta"
}

@test "image DIR without info or verify says the command is missing, not 'no DIR given'" {
	mkdir "$TMP/img"
	run "$MEMVISOR" image "$TMP/img"
	[ "$status" -eq 2 ]
	assert_line --index 0 "memvisor image: no command given before $TMP/img: \`memvisor image info $TMP/img\` or \`memvisor image verify $TMP/img\`"
	refute_output --partial "no DIR given"
	run "$MEMVISOR" image "$TMP/none"
	[ "$status" -eq 2 ]
	assert_line --index 0 "memvisor image: unknown command '$TMP/none' (info or verify)"
	run "$MEMVISOR" image info
	[ "$status" -eq 2 ]
	assert_line --index 0 "memvisor image: no DIR given"
}

@test "run --socket in a directory that does not exist fails (125) and makes nothing" {
	run "$MEMVISOR" run --socket "$TMP/nodir/x.sock" -- true
	[ "$status" -eq 125 ]
	assert_output "memvisor: cannot create socket $TMP/nodir/x.sock: directory $TMP/nodir does not exist"
	[ ! -e "$TMP/nodir" ]
	# memvisor's own runtime directory is made when it is missing.
	[ ! -e "$XDG_RUNTIME_DIR/memvisor" ]
	run "$MEMVISOR" run --socket "$XDG_RUNTIME_DIR/memvisor/x.sock" -- true
	assert_success
	[ -d "$XDG_RUNTIME_DIR/memvisor" ]
}

@test "status in text shows evicted memory: what each process is owed, from which image, its faults" {
	# It was only in --json: a user who evicted saw nothing of it.
	skip_unless_uffd
	MV_ARGS=()
	start_fed "$WL/evict_victim" --mib 16
	run ctl status
	assert_success
	refute_output --partial "evicted:"
	ctl checkpoint "$TMP/img" --evict --wait >/dev/null
	run ctl status
	assert_success
	assert_line "evicted:"
	assert_line --regexp "^  process $PID: [0-9.]+ MiB owed, .* back; image $TMP/img; [0-9]+ faults"
	say check '^ok'
	ctl reload "$TMP/img" --wait >/dev/null
	stop_fed
}

@test "every view of the counts says which memory calls were decided in the kernel and not counted, and --notify-all counts them" {
	start_idle --stats-json "$TMP/s.json"
	run ctl stats
	assert_success
	assert_line --regexp "^not counted \(decided in the kernel\): mmap, munmap, "
	assert_line "counted only where the policy could refuse: brk (process tracking)"
	assert_line '  `memvisor run --notify-all` counts every memory call'
	refute_line --regexp "^  mmap +[0-9]"
	[ "$(ctl --json stats | json_get - '"mmap" in d["uncounted"]["never"] and not d["uncounted"]["notify_all"]')" = True ]
	run ctl status
	assert_line --regexp "^not counted: +mmap, munmap, "
	run ctl metrics
	assert_line 'memvisor_syscall_notified{syscall="mmap",when="never"} 1'
	assert_line 'memvisor_syscall_notified{syscall="brk",when="some"} 1'
	run --separate-stderr timeout 1 "$MEMVISOR" ctl --socket "$SOCK" events
	[[ $stderr == *"no events for (decided in the kernel): mmap, munmap, "* ]]
	stop_idle
	[ "$(json_get "$TMP/s.json" '"mmap" in d["uncounted"]["never"]')" = True ]

	# A policy that may refuse some: those are counted when it could.
	rm -f "$TMP/go"
	start_idle --policy "$BATS_TEST_DIRNAME/../../policy/examples/wx-strict.json"
	run ctl stats
	assert_output --partial "mprotect (wx)"
	run ctl metrics
	assert_line 'memvisor_syscall_notified{syscall="mprotect",when="some"} 1'
	stop_idle

	rm -f "$TMP/go"
	start_idle --notify-all --stats-json "$TMP/s.json"
	run ctl stats
	assert_success
	refute_output --partial "not counted"
	assert_line --regexp "^  mmap +[1-9]"
	run ctl metrics
	assert_line 'memvisor_syscall_notified{syscall="mmap",when="always"} 1'
	run ctl status
	refute_output --partial "not counted"
	stop_idle
	[ "$(json_get "$TMP/s.json" 'd["uncounted"] == {"notify_all": True, "never": [], "some": []}')" = True ]
}

# in_pty COLS CMD...: run CMD on a pseudo-terminal COLS wide (script(1));
# its output, carriage returns and newlines as line ends, in $TMP/pty.
in_pty() {
	local cols=$1 cmd
	shift
	printf -v cmd '%q ' "$@"
	env -u COLUMNS LANG=C.UTF-8 script -qec "stty cols $cols rows 24; $cmd" /dev/null |
		tr '\r' '\n' >"$TMP/pty"
}

# The longest line of $TMP/pty (or FILE), in characters, escapes removed.
widest() {
	python3 -c '
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
print(max((len(re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", l)) for l in text.split("\n")), default=0))' "${1:-$TMP/pty}"
}

@test "on an 80-column terminal tables, progress and help fit; piped or with --full, lines are whole" {
	# A program whose path alone is wider than the terminal.
	local dir=$TMP/a-directory-with-a-name-long-enough-to-push-any-table-row-past-eighty-columns
	mkdir -p "$dir"
	cp "$(command -v sleep)" "$dir/sleep"
	start_bg -- "$dir/sleep" 60
	local pid
	pid=$(ctl --json ps | json_get - 'd["processes"][0]["pid"]')
	for view in ps "regions $pid" stats jobs; do
		# shellcheck disable=SC2086
		in_pty 80 "$MEMVISOR" ctl --socket "$SOCK" $view
		echo "$view: $(widest) columns"
		[ "$(widest)" -le 80 ]
		grep -q . "$TMP/pty"
	done
	in_pty 80 "$MEMVISOR" ctl --socket "$SOCK" regions "$pid"
	grep -q "…$" "$TMP/pty"
	# Piped: whole lines; on the terminal with --full too.
	ctl regions "$pid" >"$TMP/piped"
	[ "$(widest "$TMP/piped")" -gt 80 ]
	grep -q "$dir/sleep$" "$TMP/piped"
	in_pty 80 "$MEMVISOR" ctl --socket "$SOCK" regions "$pid" --full
	[ "$(widest)" -gt 80 ]
	in_pty 80 "$MEMVISOR" ctl --list
	[ "$(widest)" -le 80 ]
	in_pty 80 "$MEMVISOR" check
	[ "$(widest)" -le 80 ]
	# The progress line is redrawn in place: never as wide as the terminal
	# (it would wrap and leave a line behind each redraw).
	in_pty 80 "$MEMVISOR" ctl --socket "$SOCK" checkpoint "$TMP/img" --wait
	cat "$TMP/pty"
	grep -q "checkpoint .*\[\.\." "$TMP/pty"
	grep "\[[.#]" "$TMP/pty" >"$TMP/bars"
	[ "$(widest "$TMP/bars")" -lt 80 ]
	[ "$(widest)" -le 80 ]
	# On a narrower terminal the line the job ends with is cut, not
	# wrapped, whatever its sizes and rate; the image's path stays whole.
	in_pty 50 "$MEMVISOR" ctl --socket "$SOCK" checkpoint "$TMP/img2" --wait
	cat "$TMP/pty"
	grep "job [0-9]* checkpoint done" "$TMP/pty" >"$TMP/done"
	[ "$(widest "$TMP/done")" -le 50 ]
	grep "\[[.#]" "$TMP/pty" >"$TMP/bars"
	[ "$(widest "$TMP/bars")" -lt 50 ]
	grep -q "^image $TMP/img2 " "$TMP/pty"
	kill "$MVPID"
	wait "$MVPID" || true
	# --help of every command, and of each ctl command, at most 80.
	local c
	for c in "" run ctl image policy check agent oci-profile; do
		# shellcheck disable=SC2086
		"$MEMVISOR" $c --help >"$TMP/help"
		[ "$(widest "$TMP/help")" -le 80 ] || { echo "memvisor $c --help: $(widest "$TMP/help") columns"; return 1; }
	done
	"$MEMVISOR" ctl --help | sed -n '/^Commands:/,/^$/p' | awk 'NF && !/^Commands/ && /^  [a-z]/ {print $1}' | sort -u >"$TMP/cmds"
	[ -s "$TMP/cmds" ]
	while read -r c; do
		"$MEMVISOR" ctl "$c" --help >"$TMP/help"
		[ "$(widest "$TMP/help")" -le 80 ] || { echo "memvisor ctl $c --help: $(widest "$TMP/help") columns"; return 1; }
	done <"$TMP/cmds"
}

@test "ps tells memvisor's helper from memvisor: the reaper is titled, not a second 'memvisor run'" {
	start_idle
	local cmd reaper
	cmd=$(ctl --json status | json_get - 'd["command_pid"]')
	reaper=$(awk '{print $4}' "/proc/$cmd/stat")
	[ "$reaper" != "$MVPID" ]
	[ "$(tr '\0' ' ' <"/proc/$reaper/cmdline" | sed 's/ *$//')" = "memvisor reaper of pid $cmd" ]
	[ "$(cat "/proc/$reaper/comm")" = memvisor-reap ]
	# memvisor itself keeps its command line.
	tr '\0' ' ' <"/proc/$MVPID/cmdline" | grep -q "^$MEMVISOR run --socket "
	stop_idle
}

@test "image info says an image goes back only into its processes, by the memvisor that took it" {
	mkfifo "$TMP/go"
	"$MEMVISOR" run --name "infotest$$" -- sh -c "read x <'$TMP/go'" </dev/null &
	MVPID=$!
	remember_pid $MVPID
	wait_for 10 "$MEMVISOR" ctl -n "infotest$$" ps
	"$MEMVISOR" ctl -n "infotest$$" checkpoint "$TMP/img" --wait >/dev/null
	run "$MEMVISOR" image info "$TMP/img"
	assert_success
	assert_line "reloads:   only into these processes, by memvisor pid $MVPID (-n infotest$$)"
	[ "$("$MEMVISOR" image info --json "$TMP/img" | json_get - 'd["supervisor"]')" = "{\"pid\": $MVPID, \"name\": \"infotest$$\"}" ]
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
	stop_idle
	grep -q "only into the processes it was taken from" "$BATS_TEST_DIRNAME/../../README.md"
}
