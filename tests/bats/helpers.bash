# Shared setup for the bats tests. MEMVISOR and MEMVISOR_BUILD come from
# tests/run.sh; running a file directly with bats works too.
load /usr/lib/bats/bats-support/load.bash
load /usr/lib/bats/bats-assert/load.bash

ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
: "${MEMVISOR_BUILD:=$ROOT/build}"
: "${MEMVISOR:=$MEMVISOR_BUILD/memvisor}"
WL=$MEMVISOR_BUILD/workloads
# The tests' Python scripts.
HELPERS=$ROOT/tests/helpers
export MEMVISOR MEMVISOR_BUILD WL

# Sockets and runtime files of each test live in its own temporary dir.
setup_tmp() {
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/mv.XXXXXX")
	chmod 755 "$TMP"
	export XDG_RUNTIME_DIR=$TMP/run
	mkdir -p "$XDG_RUNTIME_DIR"
	chmod 700 "$XDG_RUNTIME_DIR"
}

teardown_tmp() {
	# Kill only what this test started (pids recorded in $TMP/pids).
	if [ -f "$TMP/pids" ]; then
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$TMP/pids"
	fi
	rm -rf "$TMP"
}

# The usual setup and teardown: a temporary dir, SOCK in it, fd 7 closed
# at the end. A file that defines its own replaces them.
setup() {
	setup_tmp
	SOCK=$TMP/ctl.sock
}
teardown() {
	exec 7>&- 2>/dev/null || true
	teardown_tmp
}

remember_pid() { echo "$1" >>"$TMP/pids"; }

# memvisor ctl on this test's socket, $SOCK.
ctl() { "$MEMVISOR" ctl --socket "$SOCK" "$@"; }

# The same, killed after SECONDS: for a request that must not hang.
ctl_within() { # SECONDS CTL-ARGS...
	local t=$1
	shift
	timeout "$t" "$MEMVISOR" ctl --socket "$SOCK" "$@"
}

# Whether the reply to `ctl CTL-ARGS...` has a match for the grep PATTERN
# (ctl_lacks: has none, or there is no reply); for wait_for.
ctl_has() { # PATTERN CTL-ARGS...
	local re=$1
	shift
	ctl "$@" | grep -q -- "$re"
}
ctl_lacks() { ! ctl_has "$@"; }

# The control socket without memvisor ctl: bytes, many clients, a slow
# reader (tests/helpers/ctlraw.py).
raw() { python3 "$HELPERS/ctlraw.py" "$SOCK" "$@"; }

# A JSON field from a file: jq is not a dependency, python3 is.
json_get() { # FILE EXPR   (EXPR is Python, 'd' is the document)
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=eval(sys.argv[2]); print(json.dumps(r) if isinstance(r,(dict,list)) else r)' "$1" "$2"
}

# Wait until COMMAND succeeds, up to SECONDS (default 5).
wait_for() { # SECONDS CMD...
	local t=$1; shift
	local end=$((SECONDS + t))
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.05
	done
}

# The processes in the tree below PID (excluding PID).
descendants() {
	local kids
	kids=$(cat /proc/"$1"/task/*/children 2>/dev/null)
	for k in $kids; do echo "$k"; descendants "$k"; done
}

# Skip a test that needs root (switching users, mounts) when not root.
require_root() { [ "$(id -u)" = 0 ] || skip "${1:-needs root}"; }

skip_unless_cmd() { command -v "$1" >/dev/null || skip "$1 is not installed"; }

# Compare a command's output and exit status natively and supervised.
same_as_native() {
	local native_out native_rc sup_out sup_rc
	native_rc=0 sup_rc=0
	native_out=$("$@" 2>&1) || native_rc=$?
	sup_out=$("$MEMVISOR" run -- "$@" 2>&1) || sup_rc=$?
	if [ "$native_out" != "$sup_out" ] || [ "$native_rc" != "$sup_rc" ]; then
		echo "native  (rc $native_rc): $native_out" | head -20
		echo "memvisor (rc $sup_rc): $sup_out" | head -20
		return 1
	fi
}

# Start "$@" under memvisor (--socket $SOCK, then the MV_ARGS array), its
# stdin a FIFO held open on fd 7, its stdout in $TMP/out and stderr in
# $TMP/err, and wait for its "ready" line. MVPID is memvisor's pid.
start_fed() {
	rm -f "$TMP/in"
	mkfifo "$TMP/in"
	"$MEMVISOR" run --socket "$SOCK" "${MV_ARGS[@]}" -- "$@" <"$TMP/in" >"$TMP/out" 2>"$TMP/err" 7>&- &
	MVPID=$!
	remember_pid $MVPID
	exec 7>"$TMP/in"
	wait_for 60 grep -q '^ready' "$TMP/out"
}

# Close the workload's stdin and wait for memvisor's exit status.
stop_fed() {
	exec 7>&-
	wait $MVPID
}
