#!/usr/bin/env bats
# How the subcommands read their words (issue 16): one option table each,
# read with getopt_long, so --opt=value and --opt value, options before or
# after operands, and -h/--help work everywhere; a usage error exits 2
# and names the command's usage. What ctl sends is checked against a
# stand-in for memvisor that records each request; a few forms run
# against the real one.

load helpers
bats_require_minimum_version 1.5.0

# A stand-in for memvisor's socket at $FAKE: records {cmd, args} of each
# request, one line in $TMP/requests, and answers ok with a job id.
start_fake() {
	FAKE=$XDG_RUNTIME_DIR/fake.sock
	python3 -c '
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rwb")
    for line in f:
        req = json.loads(line)
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps({"cmd": req["cmd"], "args": req["args"]}, sort_keys=True) + "\n")
        res = {"job": 7, "dir": req["args"].get("dir")}
        f.write((json.dumps({"id": req["id"], "ok": True, "result": res}) + "\n").encode())
        f.flush()
    c.close()
' "$FAKE" "$TMP/requests" >"$TMP/fake.out" 3>&- &
	remember_pid $!
	disown $! # teardown kills it: no "Killed" notice
	wait_for 5 grep -q ready "$TMP/fake.out"
	: >"$TMP/requests"
}

# The request that `ctl --socket $FAKE ARGS...` sent, or nothing.
sent() {
	: >"$TMP/requests"
	"$MEMVISOR" ctl --socket "$FAKE" "$@" >/dev/null
	cat "$TMP/requests"
}

@test "ctl: --opt=value and --opt value, before or after the operand, send the same request" {
	start_fake
	a=$(sent reload "$TMP" --rate 200)
	[ "$a" = "$(sent reload "$TMP" --rate=200)" ]
	[ "$a" = "$(sent reload --rate=200 "$TMP")" ]
	[ "$a" = "$(sent reload --rate 200 "$TMP")" ]
	[ "$a" = '{"args": {"dir": "'"$TMP"'", "rate": 200.0}, "cmd": "reload"}' ]
	a=$(sent regions 42 --source=maps)
	[ "$a" = "$(sent regions 42 --source maps)" ]
	[ "$a" = "$(sent regions --source maps 42)" ]
	[ "$a" = '{"args": {"pid": 42, "source": "maps"}, "cmd": "regions"}' ]
}

@test "ctl checkpoint: every option in either form, in any place, and a relative DIR made absolute" {
	start_fake
	cd "$TMP"
	a=$(sent checkpoint img --pid 5 --pid 6 --force --evict --buffer 32M --stop-timeout 2)
	[ "$a" = "$(sent checkpoint --pid=5 --pid=6 --buffer=32M --stop-timeout=2 --force --evict img)" ]
	[ "$a" = "$(sent checkpoint --pid 5 img --evict --buffer=32M --pid=6 --stop-timeout 2 --force)" ]
	[ "$(echo "$a" | json_get /dev/stdin 'd["args"]["dir"]')" = "$TMP/img" ]
	[ "$(echo "$a" | json_get /dev/stdin 'd["args"]["pids"]')" = "[5, 6]" ]
	[ "$(echo "$a" | json_get /dev/stdin 'd["args"]["buffer"]')" = $((32 << 20)) ]
	[ "$(echo "$a" | json_get /dev/stdin 'd["args"]["stop_timeout_ms"]')" = 2000 ]
	[ "$(echo "$a" | json_get /dev/stdin 'd["args"]["force"] and d["args"]["evict"]')" = True ]
	# No --pid: no pids member (every process); --wait is ctl's, not sent.
	a=$(sent checkpoint img)
	[ "$a" = '{"args": {"dir": "'"$TMP"'/img"}, "cmd": "checkpoint"}' ]
}

@test "ctl: its own options also after the command; call and policy set send what they say" {
	start_fake
	a=$(sent --json status)
	[ "$a" = '{"args": {}, "cmd": "status"}' ]
	[ "$a" = "$(sent status --json)" ]
	# --socket and --json after the command: the one-line JSON result.
	: >"$TMP/requests"
	run "$MEMVISOR" ctl ps --socket "$FAKE" --json -t 5
	assert_success
	assert_output '{"job":7,"dir":null}'
	[ "$(cat "$TMP/requests")" = '{"args": {}, "cmd": "ps"}' ]
	a=$(sent call regions '{"pid": 9, "limit": 3}')
	[ "$a" = '{"args": {"limit": 3, "pid": 9}, "cmd": "regions"}' ]
	[ "$(sent call hello)" = '{"args": {}, "cmd": "hello"}' ]
	echo '{"version": 1}' >"$TMP/p.json"
	cd "$TMP"
	[ "$(sent policy set p.json)" = '{"args": {"path": "'"$TMP"'/p.json"}, "cmd": "policy_set"}' ]
	[ "$(sent stats)" = '{"args": {}, "cmd": "stats"}' ]
	[ "$(sent stats 12)" = '{"args": {"pid": 12}, "cmd": "stats"}' ]
	[ "$(sent job 3)" = '{"args": {"id": 3}, "cmd": "job"}' ]
}

@test "ctl: a usage error exits 2 with the command's usage, and sends nothing" {
	start_fake
	check() { # EXPECTED-MESSAGE USAGE-LINE ARGS...
		local msg=$1 use=$2
		shift 2
		: >"$TMP/requests"
		run "$MEMVISOR" ctl --socket "$FAKE" "$@"
		[ "$status" -eq 2 ] || { echo "ctl $*: status $status: $output"; return 1; }
		assert_output --partial "$msg"
		assert_output --partial "Usage: memvisor ctl $use"
		[ ! -s "$TMP/requests" ]
	}
	check "'x' is not a process id" "regions [OPTION]... PID" regions x
	check "no PID given" "regions" regions --source maps
	check "unexpected argument '2'" "regions" regions 1 2
	check "--rate: 'fast' is not a number of MB/s" "reload [OPTION]... DIR" reload "$TMP" --rate=fast
	check "option '--rate' needs an argument" "reload" reload "$TMP" --rate
	# (A DIR that does not exist is an error, 1: tested below.)
	check "no DIR given" "checkpoint [OPTION]... DIR" checkpoint --force
	check "--buffer: 'lots' is not a size" "checkpoint" checkpoint d --buffer lots
	check "--stop-timeout: '0' is not a number of seconds" "checkpoint" checkpoint d --stop-timeout=0
	check "--pid: 'all' is not a process id" "checkpoint" checkpoint d --pid all
	check "'x' is not a job id" "job [OPTION]... ID" job x
	check "unknown option '--wait'" "ps [OPTION]..." ps --wait
	check "--json: 'fancy' is not short or pretty" "ps" ps --json=fancy
	check "unexpected argument 'pretty'" "ps" ps --json pretty
	check "unexpected argument 'frob'" "policy [OPTION]..." policy frob
	assert_output --partial "memvisor ctl policy set [OPTION]... FILE"
	check "no FILE given" "policy [OPTION]..." policy set
	check "'[1]' is not a JSON object: not an object" "call [OPTION]... COMMAND [JSON-ARGS]" call regions '[1]'
	check "unknown option '--bogus'" "[OPTION]... COMMAND" --bogus ps
	run "$MEMVISOR" ctl --socket "$FAKE" frobnicate
	[ "$status" -eq 2 ]
	assert_output --partial "unknown command 'frobnicate'"
}

@test "-h and --help on every command print its usage and exit 0, without connecting" {
	for cmd in hello status ps regions stats events policy "policy set" job "job cancel" "job unthrottle" \
		checkpoint reload jobs call; do
		for h in -h --help; do
			# shellcheck disable=SC2086
			run "$MEMVISOR" ctl --socket "$TMP/none.sock" $cmd $h
			[ "$status" -eq 0 ] || { echo "ctl $cmd $h: $status: $output"; return 1; }
			assert_line --index 0 --partial "Usage: memvisor ctl $cmd "
			assert_output --partial -- "--socket PATH"
		done
	done
	run "$MEMVISOR" ctl checkpoint --help
	assert_output --partial -- "--stop-timeout SECONDS"
	assert_output --partial -- "--buffer SIZE"
	assert_output --partial -- "--wait"
	run "$MEMVISOR" ctl reload -h
	assert_output --partial -- "--rate MB/s"
	run "$MEMVISOR" ctl regions -h
	assert_output --partial -- "--source HOW"
	for words in "ctl" "image" "image info" "image verify" "policy" "policy check" "run"; do
		for h in -h --help; do
			# shellcheck disable=SC2086
			run "$MEMVISOR" $words $h
			[ "$status" -eq 0 ] || { echo "$words $h: $status: $output"; return 1; }
			assert_line --index 0 --partial "Usage: memvisor"
		done
	done
}

@test "image and policy: options after operands, usage errors exit 2" {
	echo '{"version": 1, "wx": "deny"}' >"$TMP/p.json"
	run "$MEMVISOR" policy check --json "$TMP/p.json"
	assert_success
	json=$output
	run "$MEMVISOR" policy check "$TMP/p.json" --json
	assert_success
	[ "$output" = "$json" ]
	run "$MEMVISOR" policy --explain check "$TMP/p.json"
	assert_success
	assert_output --partial "notified when prot"
	run "$MEMVISOR" policy check -- "$TMP/p.json"
	assert_success
	run "$MEMVISOR" policy check --explain=yes "$TMP/p.json"
	[ "$status" -eq 2 ]
	assert_output --partial "option '--explain' takes no argument"
	assert_output --partial "Usage: memvisor policy check"
	run "$MEMVISOR" image info
	[ "$status" -eq 2 ]
	assert_output --partial "no DIR given"
	assert_output --partial "Usage: memvisor image info"
	run "$MEMVISOR" image verify "$TMP" --jsn
	[ "$status" -eq 2 ]
	assert_output --partial "unknown option '--jsn'"
	run "$MEMVISOR" image info "$TMP" "$TMP"
	[ "$status" -eq 2 ]
	assert_output --partial "unexpected argument"
}

# The mappings workload under memvisor, fed through fd 7.
start_mappings() {
	SOCK=$TMP/ctl.sock
	mkfifo "$TMP/in"
	"$MEMVISOR" run --socket "$SOCK" -- "$WL/mappings" <"$TMP/in" >"$TMP/out" &
	MVPID=$!
	remember_pid $MVPID
	exec 7>"$TMP/in"
	wait_for 10 grep -q '^ready' "$TMP/out"
	PID=$(awk '/^ready/{print $2}' "$TMP/out")
}

stop_mappings() {
	exec 7>&-
	wait $MVPID
}

@test "the new forms against a real memvisor: ps --json, regions PID --source maps, checkpoint --opt=value DIR" {
	start_mappings
	run "$MEMVISOR" ctl ps --socket "$SOCK" --json
	assert_success
	echo "$output" >"$TMP/ps.json"
	[ "$(json_get "$TMP/ps.json" '[p["pid"] for p in d["processes"]]')" = "[$PID]" ]
	run "$MEMVISOR" ctl --socket "$SOCK" regions "$PID" --source maps --json
	assert_success
	echo "$output" >"$TMP/r.json"
	json_get "$TMP/r.json" 'd["source"]' | grep -q '^maps'
	run "$MEMVISOR" ctl --socket "$SOCK" checkpoint --stop-timeout=5 --buffer=16M --pid="$PID" --wait "$TMP/img"
	assert_success
	assert_output --partial "image $TMP/img"
	run "$MEMVISOR" image verify "$TMP/img" --json
	assert_success
	[ "$(json_get /dev/stdin 'd["ok"]' <<<"$output")" = True ]
	run "$MEMVISOR" image --json info "$TMP/img"
	assert_success
	[ "$(json_get /dev/stdin 'd["processes"]' <<<"$output")" = 1 ]
	stop_mappings
}

@test "the new forms against a real memvisor: checkpoint DIR --evict --wait, reload --rate=N DIR --wait" {
	v=$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null) || skip "no userfaultfd in this kernel"
	[ "$(id -u)" = 0 ] || [ "$v" = 1 ] || skip "userfaultfd needs root or vm.unprivileged_userfaultfd=1"
	start_mappings
	run "$MEMVISOR" ctl --socket "$SOCK" checkpoint "$TMP/img" --evict --wait
	assert_success
	assert_output --partial "evicted:"
	run --separate-stderr "$MEMVISOR" ctl --socket "$SOCK" reload --rate=500 "$TMP/img" --wait --json
	assert_success
	[ "$(json_get /dev/stdin 'd["state"]' <<<"$output")" = done ]
	stop_mappings
}

@test "a bare memvisor and an unknown command are usage errors (2); run's own stay 125, like env(1)" {
	run "$MEMVISOR"
	[ "$status" -eq 2 ]
	assert_output --partial "Usage: memvisor COMMAND"
	run "$MEMVISOR" frobnicate
	[ "$status" -eq 2 ]
	assert_output --partial "unknown command 'frobnicate'"
	run "$MEMVISOR" run --bogus true
	[ "$status" -eq 125 ]
	assert_output --partial "Usage: memvisor run [OPTION]..."
	run "$MEMVISOR" image
	[ "$status" -eq 2 ]
	run "$MEMVISOR" policy
	[ "$status" -eq 2 ]
	run "$MEMVISOR" ctl
	[ "$status" -eq 2 ]
}

@test "run: --opt=value and --opt value are the same; options end at the command" {
	run "$MEMVISOR" run --stats-json="$TMP/a.json" --kill-grace=0.5 --log-level=error -- true
	assert_success
	run "$MEMVISOR" run --stats-json "$TMP/b.json" --kill-grace 0.5 --log-level error true
	assert_success
	[ "$(json_get "$TMP/a.json" 'd["command"]')" = "$(json_get "$TMP/b.json" 'd["command"]')" ]
	# The command's own options are its own, not run's.
	run "$MEMVISOR" run sh -c 'echo "$1"' sh --help
	assert_success
	assert_output "--help"
	run "$MEMVISOR" run --kill-grace=soon true
	[ "$status" -eq 125 ]
	assert_output --partial "--kill-grace: 'soon' is not a number of seconds"
	run "$MEMVISOR" run --stats-json
	[ "$status" -eq 125 ]
	assert_output --partial "option '--stats-json' needs an argument"
}

@test "ctl --json, -j and --json=short print one line; --json=pretty the same result indented" {
	start_fake
	one=$("$MEMVISOR" ctl --socket "$FAKE" ps --json)
	[ "$one" = '{"job":7,"dir":null}' ]
	[ "$("$MEMVISOR" ctl --socket "$FAKE" -j ps)" = "$one" ]
	[ "$("$MEMVISOR" ctl --socket "$FAKE" ps --json=short)" = "$one" ]
	run "$MEMVISOR" ctl --socket "$FAKE" --json=pretty ps
	assert_success
	[ "${#lines[@]}" -gt 1 ]
	[ "$(json_get /dev/stdin 'd' <<<"$output")" = "$(json_get /dev/stdin 'd' <<<"$one")" ]
	# image and policy take the same modes.
	echo '{"version": 1}' >"$TMP/p.json"
	run "$MEMVISOR" policy check --json=short "$TMP/p.json"
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	run "$MEMVISOR" policy check --json "$TMP/p.json"
	[ "${#lines[@]}" -gt 1 ]
	run "$MEMVISOR" image info --json=loud "$TMP"
	[ "$status" -eq 2 ]
	assert_output --partial "--json: 'loud' is not short or pretty"
}

@test "run --name NAME and ctl -n NAME: a supervisor by name; names are checked and not shared" {
	# One FIFO each: two readers of one FIFO can both end on the first
	# line (one reads it, the other sees the writer close), and the
	# second echo then waits for a reader for ever.
	mkfifo "$TMP/go" "$TMP/go2"
	"$MEMVISOR" run --name web-1 -- sh -c "read x <'$TMP/go'" </dev/null &
	mv=$!
	remember_pid $mv
	wait_for 10 test -S "$XDG_RUNTIME_DIR/memvisor/web-1.sock"
	# A second memvisor, unnamed: ctl needs to be told which.
	"$MEMVISOR" run -- sh -c "read x <'$TMP/go2'" </dev/null &
	remember_pid $!
	wait_for 10 test -S "$XDG_RUNTIME_DIR/memvisor/$!.sock"
	run "$MEMVISOR" ctl -n web-1 --json hello
	assert_success
	[ "$(json_get /dev/stdin 'd["name"]' <<<"$output")" = web-1 ]
	[ "$(json_get /dev/stdin 'd["pid"]' <<<"$output")" = "$mv" ]
	[ "$("$MEMVISOR" ctl status --name=web-1 --json | json_get - 'd["command"][0]')" = sh ]
	run "$MEMVISOR" ctl --list
	assert_success
	assert_output --regexp "web-1 +$mv +$XDG_RUNTIME_DIR/memvisor/web-1.sock +sh -c"
	assert_line --regexp "^- +[0-9]+ +$XDG_RUNTIME_DIR/memvisor/[0-9]+.sock"
	# The name is taken while web-1 runs: refused before the command runs.
	run "$MEMVISOR" run --name web-1 -- touch "$TMP/ran"
	[ "$status" -eq 125 ]
	assert_output --partial "the name web-1 is taken"
	[ ! -e "$TMP/ran" ]
	for bad in a/b .hidden -x 1234 "$(printf 'n%.0s' $(seq 65))" ""; do
		run "$MEMVISOR" run --name "$bad" -- touch "$TMP/ran"
		[ "$status" -eq 125 ] || { echo "--name '$bad': $status"; return 1; }
		assert_output --partial "is not a name"
		run "$MEMVISOR" ctl --name "$bad" ps
		[ "$status" -eq 2 ] || { echo "ctl --name '$bad': $status"; return 1; }
	done
	[ ! -e "$TMP/ran" ]
	run "$MEMVISOR" run --name x --socket "$TMP/s.sock" -- true
	[ "$status" -eq 125 ]
	assert_output --partial "--name and --socket: choose one"
	run "$MEMVISOR" ctl -n nosuch ps
	[ "$status" -eq 3 ]
	assert_output --partial "no running memvisor is named nosuch"
	echo go >"$TMP/go"
	echo go >"$TMP/go2"
	wait $mv
	# Gone with its memvisor: the name is free again.
	[ ! -e "$XDG_RUNTIME_DIR/memvisor/web-1.sock" ]
}

# Issue 28, point 6: a short option means one thing in every command
# (-L log level, -l log file, -j JSON output), --json takes a MODE
# everywhere, and a word that names nothing is an error (1), not a usage
# error (2).
@test "one meaning per short option across commands; --json[=MODE] everywhere; a missing DIR is an error, not a usage error" {
	local c
	for c in run ctl image policy check agent oci-profile; do
		"$MEMVISOR" $c --help | grep -oE '^ +-[A-Za-z], --[a-z-]+' | sed "s/^ *//;s/,//"
	done | sort -u >"$TMP/shorts"
	cat "$TMP/shorts"
	# Each short option names one long option, whichever command has it.
	run awk '{n[$1]++} END {for (s in n) if (n[s] > 1) print s}' "$TMP/shorts"
	assert_output ""
	grep -qx -- "-L --log-level" "$TMP/shorts"
	grep -qx -- "-j --json" "$TMP/shorts"
	for c in check image policy; do
		"$MEMVISOR" $c --help | grep -q -- "-j, --json\[=MODE\]"
	done
	run "$MEMVISOR" check --json=pretty
	[ "$status" -le 1 ]
	[ "$(json_get - 'd["memvisor"] != ""' <<<"$output")" = True ]
	[ "${#lines[@]}" -gt 10 ]
	run "$MEMVISOR" check -j
	[ "$status" -le 1 ]
	[ "${#lines[@]}" -eq 1 ]

	start_idle
	run ctl reload "$TMP/no-such-image"
	assert_failure 1
	assert_output "memvisor ctl: reload: $TMP/no-such-image: No such file or directory"
	run ctl checkpoint "$TMP/no-such-dir/img"
	assert_failure 1
	run ctl reload
	assert_failure 2
	assert_line --partial "Usage: memvisor ctl reload"
	stop_idle
}
