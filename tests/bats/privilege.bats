#!/usr/bin/env bats
# Privilege: setuid and file-capability programs under supervision.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	printf '{"version": 1, "wx": "deny"}\n' >"$TMP/deny.json"
}
teardown() { teardown_tmp; }

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
