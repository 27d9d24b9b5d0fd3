#!/usr/bin/env bats
# Privilege: setuid and file-capability programs under supervision.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	policy deny '{"version": 1, "wx": "deny"}'
}

# A setuid-root copy of cred_probe that nobody can run.
suid_probe() {
	require_root "needs root to install a setuid-root program"
	skip_unless_cmd setpriv
	cp "$WL/cred_probe" "$TMP/suid_probe"
	chown root:root "$TMP/suid_probe"
	chmod 4755 "$TMP/suid_probe"
	AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
	run "${AS_NOBODY[@]}" "$TMP/suid_probe"
	[[ "$output" == "euid 0 "* ]] || skip "setuid programs do not gain root here (nosuid mount?): $output"
}

@test "as root: a setuid-root program started as nobody runs as root, as natively" {
	suid_probe
	native=$output
	# memvisor has CAP_SYS_ADMIN: the filter is loaded without no_new_privs,
	# which would have made the exec ignore the setuid bit.
	run "$MEMVISOR" run -- "${AS_NOBODY[@]}" "$TMP/suid_probe"
	assert_success
	assert_output "$native"
	assert_output --partial "euid 0 nnp 0"
	# passwd -S prints the caller's own entry, natively and supervised alike.
	if command -v passwd >/dev/null; then
		same_as_native "${AS_NOBODY[@]}" passwd -S
	fi
}

@test "as root: under W^X deny a setuid program gains root and keeps MDWE and the policy" {
	suid_probe
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "${AS_NOBODY[@]}" "$TMP/suid_probe"
	assert_success
	assert_output --partial "euid 0 nnp 0"
	if "$WL/wx_test" mdwe | grep -qv 'mdwe -1'; then
		assert_output --regexp 'mdwe [1-9]'
	fi
	# The filter stays across the setuid exec: W^X is still decided.
	cp "$WL/wx_test" "$TMP/suid_wx"
	chmod 4755 "$TMP/suid_wx"
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "${AS_NOBODY[@]}" "$TMP/suid_wx" heap-exec
	assert_failure 13
}

@test "without CAP_SYS_ADMIN no_new_privs is set (the kernel demands it), with a warning for a setuid command" {
	require_root "needs root to switch to nobody"
	skip_unless_cmd setpriv
	cp "$WL/cred_probe" "$TMP/probe"
	mkdir -m 700 "$TMP/nobody" && chown 65534 "$TMP/nobody"
	NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env XDG_RUNTIME_DIR="$TMP/nobody")
	run "${NOBODY[@]}" "$MEMVISOR" run -- "$TMP/probe"
	assert_success
	assert_output "euid 65534 nnp 1 mdwe 0"
	chmod 4755 "$TMP/probe"
	run "${NOBODY[@]}" "$MEMVISOR" run -- "$TMP/probe"
	assert_success
	assert_output --partial "memvisor: warning: $TMP/probe is setuid or setgid, but memvisor has no CAP_SYS_ADMIN"
	assert_output --partial "nnp 1"
}

@test "--user: the command runs as that user while memvisor keeps its uid, and cannot reach the socket" {
	require_root "--user needs root"
	run "$MEMVISOR" run --user nobody -- id -u
	assert_success
	assert_output 65534
	run "$MEMVISOR" run --user nobody:nogroup -- sh -c 'id -g; id -G'
	assert_success
	assert_output "$(printf '%s\n%s' "$(getent group nogroup | cut -d: -f3)" "$(getent group nogroup | cut -d: -f3)")"
	# Supervised as usual: its memory calls reach memvisor, and memvisor
	# (root) answers ctl; the program itself, as nobody, cannot connect.
	start_bg --user nobody -- sh -c 'sleep 1; ls -l /proc/self/status >/dev/null; python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print(\"connected\")
except OSError as e:
    print(\"refused\", e.errno)
" "$0"' "$SOCK" >"$TMP/out" 2>&1
	run ctl ps
	assert_success
	assert_output --partial "sleep"
	wait $MVPID
	cat "$TMP/out"
	grep -q "^refused 13" "$TMP/out"
	# The parent-death signal survives the change of credentials: a
	# SIGKILL of memvisor still ends the command.
	"$MEMVISOR" run --user nobody -- sleep 300 &
	mv=$!
	remember_pid $mv
	wait_for 10 sh -c "pgrep -u 65534 -f 'sleep 300' >/dev/null"
	kill -9 $mv
	wait_for 10 sh -c "! pgrep -u 65534 -f 'sleep 300' >/dev/null"
}

@test "--user: an unknown user, a bad spec, and a caller that is not root are refused before the command starts" {
	require_root "switches to nobody to try it unprivileged"
	run "$MEMVISOR" run --user no-such-user-xyz -- true
	[ "$status" = 125 ]
	assert_output --partial "no user 'no-such-user-xyz'"
	run "$MEMVISOR" run --user nobody: -- true
	[ "$status" = 125 ]
	assert_output --partial "is not USER or USER:GROUP"
	run setpriv --reuid=65534 --regid=65534 --clear-groups -- "$MEMVISOR" run --user root -- touch "$TMP/ran"
	[ "$status" = 125 ]
	assert_output --partial "--user needs root"
	[ ! -e "$TMP/ran" ]
}

# Issue 27: evict makes a userfaultfd inside the program, which a program
# without CAP_SYS_PTRACE may not (vm.unprivileged_userfaultfd=0, a
# container's default). The job used to find out after it had written the
# whole image; it now refuses before it copies anything.
@test "--user: checkpoint --evict of a program without CAP_SYS_PTRACE is refused before anything is written" {
	require_root "--user needs root"
	[ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null)" = 0 ] ||
		skip "vm.unprivileged_userfaultfd=1: every program may make a userfaultfd"
	chmod 755 "$TMP"
	MV_ARGS=(--user nobody)
	start_fed "$WL/rb_target" 16
	run ctl --json checkpoint "$TMP/img" --evict --wait
	echo "$output"
	assert_failure
	assert_output --partial "lacks CAP_SYS_PTRACE"
	assert_output --partial "nothing was written"
	echo "$output" | tail -1 >"$TMP/job.json"
	[ "$(json_get "$TMP/job.json" 'd["done"]')" = 0 ]
	[ ! -e "$TMP/img" ]
	no_temp_image
	say x '^got 0 '
	stop_fed
}
