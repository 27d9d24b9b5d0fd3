#!/usr/bin/env bats
# Bad policies: a clear FILE:LINE:COL: /pointer: message, exit 1 from
# `policy check`, exit 125 from `run` before the command starts.

load helpers
bats_require_minimum_version 1.5.0

# check NAME JSON EXPECTED-MESSAGE-AFTER-FILE
check_bad() {
	local f="$TMP/$1.json"
	printf '%s' "$2" >"$f"
	run "$MEMVISOR" policy check "$f"
	assert_failure 1
	assert_output --partial "$f:$3"
	# The command never starts.
	run "$MEMVISOR" run --policy "$f" -- touch "$TMP/started"
	assert_failure 125
	assert_output --partial "$f:$3"
	assert_output --partial "not a valid policy; the command was not started"
	[ ! -e "$TMP/started" ]
}

@test "bad policy: invalid JSON" {
	check_bad syntax $'{"version": 1,\n  "wx": }' '2:9: /wx: invalid JSON: unexpected token'
}

@test "bad policy: unknown key" {
	check_bad key $'{"version": 1,\n  "limts": {}}' '2:3: /limts: unknown key "limts"'
	check_bad rkey '{"version": 1, "rules": [{"syscalls": ["mmap"], "acton": "deny", "action": "deny"}]}' \
		'1:49: /rules/0/acton: unknown key "acton"'
}

@test "bad policy: wrong type" {
	check_bad type '{"version": 1, "wx": true}' '1:22: /wx: expected a string, got a boolean'
	check_bad type2 '{"version": "1"}' '1:13: /version: expected the integer 1, got a string'
}

@test "bad policy: unknown syscall name" {
	check_bad sc '{"version": 1, "rules": [{"syscalls": ["nmap"], "action": "deny"}]}' \
		'1:40: /rules/0/syscalls/0: unknown syscall "nmap"'
}

@test "bad policy: unknown errno" {
	check_bad errno '{"version": 1, "rules": [{"syscalls": ["mmap"], "action": "deny", "errno": "ENOTREAL"}]}' \
		'1:76: /rules/0/errno: unknown errno "ENOTREAL"'
}

@test "bad policy: negative and absurd sizes" {
	check_bad neg '{"version": 1, "limits": {"max_mapped": -1}}' \
		'1:41: /limits/max_mapped: a size cannot be negative (-1)'
	check_bad absurd '{"version": 1, "limits": {"max_mapped_tree": "900000T"}}' \
		'1:46: /limits/max_mapped_tree: 878.9 PiB is more than the 64.0 PiB x86-64 address space'
	check_bad overflow '{"version": 1, "limits": {"max_mapping": "99999999999999T"}}' \
		'1:42: /limits/max_mapping: size "99999999999999T" is too large'
	check_bad junk '{"version": 1, "limits": {"max_mapping": "lots"}}' \
		'1:42: /limits/max_mapping: "lots" is not a size'
}

@test "bad policy: every error is listed" {
	printf '%s' '{"version": 1, "wx": "on", "limits": {"max_regions": -3}, "rules": [{"syscalls": ["mmap"]}]}' >"$TMP/many.json"
	run "$MEMVISOR" policy check "$TMP/many.json"
	assert_failure 1
	assert_line --partial '/wx: unknown wx mode "on"'
	assert_line --partial '/limits/max_regions: must be from 1 to'
	assert_line --partial '/rules/0: missing key "action"'
	[ "${#lines[@]}" -eq 3 ]
}

@test "bad policy: missing or unreadable file, usage errors" {
	run "$MEMVISOR" policy check "$TMP/nope.json"
	assert_failure 1
	assert_output --partial "$TMP/nope.json: cannot open: No such file or directory"
	# run says it in one line, and does not call a missing file invalid.
	run "$MEMVISOR" run --policy "$TMP/nope.json" -- echo ran
	assert_failure 125
	assert_output "memvisor: --policy $TMP/nope.json: No such file or directory; the command was not started"
	run "$MEMVISOR" policy check
	assert_failure 2
	run "$MEMVISOR" policy frobnicate
	assert_failure 2
	run "$MEMVISOR" policy check --bogus x
	assert_failure 2
}
