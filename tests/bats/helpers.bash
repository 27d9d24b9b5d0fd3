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

# Sockets and runtime files of each test live in its own temporary dir;
# SOCK is the control socket's place in it.
setup_tmp() {
	TMP=$(mktemp -d "${BATS_TMPDIR:-/tmp}/mv.XXXXXX")
	chmod 755 "$TMP"
	export XDG_RUNTIME_DIR=$TMP/run
	mkdir -p "$XDG_RUNTIME_DIR"
	chmod 700 "$XDG_RUNTIME_DIR"
	SOCK=$TMP/ctl.sock
}

# Close fd 7 (a workload's stdin, see start_fed), then kill only what this
# test started (pids recorded in $TMP/pids).
teardown_tmp() {
	exec 7>&- 2>/dev/null || true
	if [ -f "$TMP/pids" ]; then
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$TMP/pids"
	fi
	rm -rf "$TMP"
}

# The usual setup and teardown. A file that defines its own replaces
# them, and calls setup_tmp and teardown_tmp from it.
setup() { setup_tmp; }
teardown() { teardown_tmp; }

# For a teardown: let a command that waits for $TMP/go (a test that failed
# before it said go) end before it is killed.
release_go() { [ -n "${TMP:-}" ] && touch "$TMP/go" && sleep 0.2; }

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

# A JSON field from a file, or from stdin if FILE is -: jq is not a
# dependency, python3 is.
json_get() { # FILE EXPR   (EXPR is Python, 'd' is the document)
	python3 -c 'import json,sys; d=json.load(sys.stdin if sys.argv[1]=="-" else open(sys.argv[1])); r=eval(sys.argv[2]); print(json.dumps(r) if isinstance(r,(dict,list)) else r)' "$1" "$2"
}

# The supervised command's pid, from memvisor's status.
command_pid() { ctl --json status | json_get - 'd["command_pid"]'; }

# XOR one byte of FILE in place; a negative OFFSET counts from the end.
flip_byte() { python3 "$HELPERS/flipbyte.py" "$@"; } # FILE OFFSET [MASK]

# policy NAME JSON: write the policy $TMP/NAME.json.
policy() { printf '%s\n' "$2" >"$TMP/$1.json"; }

# A field of the run's --stats-json "$TMP/s.json" (EXPR as for json_get).
stat_of() { json_get "$TMP/s.json" "$1"; }

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

# No process of the list is alive (a zombie waiting for init is dead).
none_alive() { # PID...
	local k state alive=0
	for k in "$@"; do
		# One read: the process may vanish between two.
		state=$(awk '/^State:/{print $2}' /proc/"$k"/status 2>/dev/null || true)
		if [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]; then
			echo "process $k survived (state $state): $(tr '\0' ' ' </proc/"$k"/cmdline 2>/dev/null)"
			alive=1
		fi
	done
	[ $alive -eq 0 ]
}

# A "NAME: N kB" field of /proc/PID/status, or of /proc/PID/FILE
# (smaps_rollup), in kB.
proc_kb() { # PID NAME [FILE]
	awk -v f="$2:" '$1 == f {print $2}' /proc/"$1"/"${3:-status}"
}

# How many descriptors PID (memvisor, MVPID) holds.
fd_count() { ls /proc/"${1:-$MVPID}"/fd | wc -l; }

# No half-written image (NAME.tmp.*) is left in DIR ($TMP).
no_temp_image() { ! ls -A "${1:-$TMP}" | grep -q '\.tmp\.'; }

# Skip a test that needs root (switching users, mounts) when not root.
require_root() { [ "$(id -u)" = 0 ] || skip "${1:-needs root}"; }

skip_unless_cmd() { command -v "$1" >/dev/null || skip "$1 is not installed"; }

# userfaultfd(2) must work for the supervised program (root here, or
# vm.unprivileged_userfaultfd=1): evict and reload need it.
skip_unless_uffd() {
	local v
	v=$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null) || skip "no userfaultfd in this kernel"
	[ "$(id -u)" = 0 ] || [ "$v" = 1 ] || skip "userfaultfd needs root or vm.unprivileged_userfaultfd=1"
}

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

# Start `memvisor run --socket $SOCK RUN-ARGS...` in the background, its
# stdin /dev/null, its stdout and stderr where the call sends them, and
# wait for the socket. MVPID is memvisor's pid.
start_bg() { # RUN-OPTIONS... -- CMD...
	"$MEMVISOR" run --socket "$SOCK" "$@" </dev/null &
	MVPID=$!
	remember_pid $MVPID
	wait_for 10 test -S "$SOCK"
}

# Start memvisor (RUN-OPTIONS...) on a shell that waits for a line on the
# FIFO $TMP/go; stop_idle sends it and waits for memvisor's exit status.
start_idle() { # RUN-OPTIONS...
	mkfifo "$TMP/go"
	start_bg "$@" -- sh -c "read x <'$TMP/go'"
}
stop_idle() {
	echo go >"$TMP/go"
	wait $MVPID
}

# Start "$@" under memvisor (--socket $SOCK, then the MV_ARGS array), its
# stdin a FIFO held open on fd 7, its stdout in $TMP/out and stderr in
# $TMP/err, and wait for its "ready" line. MVPID is memvisor's pid, PID
# the workload's: from "ready PID", or else from "pid PID" on stderr.
start_fed() {
	rm -f "$TMP/in" "$TMP/out" "$TMP/err"
	mkfifo "$TMP/in"
	"$MEMVISOR" run --socket "$SOCK" "${MV_ARGS[@]}" -- "$@" <"$TMP/in" >"$TMP/out" 2>"$TMP/err" 7>&- &
	MVPID=$!
	remember_pid $MVPID
	exec 7>"$TMP/in"
	wait_for 60 grep -q '^ready' "$TMP/out" || return 1
	PID=$(awk '/^ready/{print $2}' "$TMP/out")
	[ -n "$PID" ] || PID=$(awk '/^pid/{print $2}' "$TMP/err")
}

# Close the workload's stdin and wait for memvisor's exit status.
stop_fed() {
	exec 7>&-
	wait $MVPID
}

# The workload's output: how many lines, and those after the N-th.
out_lines() { wc -l <"$TMP/out"; }
out_after() { tail -n +$(($1 + 1)) "$TMP/out"; }
out_after_has() { out_after "$1" | grep -q -- "$2"; } # N PATTERN
out_longer_than() { [ "$(out_lines)" -gt "$1" ]; }    # N

# The whole lines after the N-th that answer a command: not "ready ...",
# which a workload prints when it waits for its next input. The last
# command's "ready" may land after the next command was sent (the
# command ran long, the machine is loaded): it is not that one's answer.
answer_lines() { # N
	local total
	total=$(out_lines)
	[ "$total" -gt "$1" ] || return 0
	sed -n "$(($1 + 1)),${total}p" "$TMP/out" | grep -v '^ready '
}
answered_after() { [ -n "$(answer_lines "$1" | head -1)" ]; } # N

# Send LINE to the fed workload; its next output line that answers it
# (answer_lines), LAST, must match the bash regex RE. Waits up to
# SAY_SECONDS (60) for it.
say() { # LINE RE
	local n
	n=$(out_lines)
	echo "$1" >&7
	wait_for "${SAY_SECONDS:-60}" answered_after "$n" || { echo "said '$1': no answer"; return 1; }
	LAST=$(answer_lines "$n" | head -1)
	[[ $LAST =~ $2 ]] || { echo "said '$1', got '$LAST', wanted /$2/"; return 1; }
}

# Send LINE to the fed workload and wait up to SECONDS (60) until a line
# it prints matches the grep PATTERN. The lines since are those after
# line SAID_AT (out_after "$SAID_AT").
say_until() { # LINE PATTERN [SECONDS]
	SAID_AT=$(out_lines)
	echo "$1" >&7
	wait_for "${3:-60}" out_after_has "$SAID_AT" "$2"
}

# io_uring must be allowed to this user (kernel.io_uring_disabled, 6.6).
skip_unless_uring() {
	local v
	v=$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null) || v=0
	case $v in
	0) ;;
	1) [ "$(id -u)" = 0 ] || skip "io_uring is for root only here (kernel.io_uring_disabled=1)" ;;
	*) skip "io_uring is disabled (kernel.io_uring_disabled=$v)" ;;
	esac
}

# mark and rollback track writes with asynchronous write-protect.
skip_unless_wp_async() {
	"$MEMVISOR" check --json | json_get - '"wp_async" in d["userfaultfd_features"]' |
		grep -q True || skip "this kernel's userfaultfd has no asynchronous write-protect (Linux 6.7)"
}
