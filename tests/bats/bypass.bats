#!/usr/bin/env bats
# Ways around a deny policy (docs/reliability.md, "Bypass attempts"): other
# ABIs' syscall numbers, sibling calls, io_uring, writes into code. Each
# must fail with the documented errno, and the denial must be counted.
# policy_wx.bats has the W^X bypasses (double mappings, shmat, personality,
# /proc/self/mem); they are not repeated here.

load helpers
bats_require_minimum_version 1.5.0

# Deny every memory call but those an ordinary program makes.
default_deny() { # NAME
	policy "$1" '{"version": 1, "default": {"action": "deny", "errno": "EPERM"}, "rules": [{"name": "mappings",
		"syscalls": ["mmap", "munmap", "mremap", "mprotect", "brk", "madvise"], "action": "allow"}]}'
}
supervised() { # POLICY ATTEMPT
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/$1.json" --stats-json "$TMP/s.json" -- "$WL/bypass" "$2"
}

@test "int 0x80: an i386 mmap2 is decided by the policy" {
	"$WL/int80_mmap" >/dev/null 2>&1 && native=0 || native=$?
	[ "$native" -ne 77 ] || skip "IA-32 emulation is disabled on this kernel (int 0x80 raises SIGSEGV)"
	policy p '{"version": 1, "rules": [{"name": "no-page", "syscalls": ["mmap"], "backing": "anon",
		"length_max": 4096, "action": "deny", "errno": "E2BIG"}]}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- "$WL/int80_mmap"
	assert_failure 7
	assert_output "int80 mmap2 errno 7 (E2BIG)"
	[ "$(stat_of 'd["totals"]["calls"]["mmap2"]["deny"]')" -ge 1 ]
}

@test "x32: an mmap by its x32 number (0x40000009) is decided by the policy" {
	policy p '{"version": 1, "rules": [{"name": "no-64m", "syscalls": ["mmap"], "length_min": "64M",
		"action": "deny", "errno": "E2BIG"}]}'
	# Natively: ENOSYS when the kernel has no x32 support, a mapping when it has.
	run "$WL/bypass" x32-mmap
	assert_line --regexp '^x32-mmap (ok|errno 38 ENOSYS)'
	supervised p x32-mmap
	assert_failure 7
	assert_output "x32-mmap errno 7 E2BIG"
	[ "$(stat_of 'd["totals"]["abi"]["x32"]')" -ge 1 ]
	[ "$(stat_of 'd["totals"]["calls"]["mmap"]["deny"]')" -ge 1 ]
}

@test "x32: mprotect(PROT_EXEC) of anonymous memory by its x32 number is refused under W^X" {
	policy wx '{"version": 1, "wx": "deny"}'
	supervised wx x32-mprotect-exec
	assert_failure 13
	assert_output "x32-mprotect-exec errno 13 EACCES"
	[ "$(stat_of 'd["totals"]["abi"]["x32"]')" -ge 1 ]
	[ "$(stat_of 'd["totals"]["calls"]["mprotect"]["deny"]')" -ge 1 ]
}

@test "pkey_mprotect(PROT_EXEC) is refused where mprotect(PROT_EXEC) is" {
	run "$WL/bypass" pkey-mprotect-exec
	assert_success
	policy wx '{"version": 1, "wx": "deny", "wx_mdwe": false}'
	supervised wx pkey-mprotect-exec
	assert_failure 13
	assert_output "pkey-mprotect-exec errno 13 EACCES"
	[ "$(stat_of 'd["totals"]["calls"]["pkey_mprotect"]["deny"]')" -ge 1 ]
}

@test "pkey_mprotect is covered by a rule naming mprotect" {
	policy p '{"version": 1, "rules": [{"name": "no-exec", "syscalls": ["mprotect"], "prot_has": ["EXEC"], "action": "deny"}]}'
	supervised p pkey-mprotect-exec
	assert_failure 1
	assert_output "pkey-mprotect-exec errno 1 EPERM"
	[ "$(stat_of 'd["totals"]["calls"]["pkey_mprotect"]["deny"]')" -eq 1 ]
}

@test "remap_file_pages is refused by a default-deny policy that does not allow it" {
	run "$WL/bypass" remap-file-pages
	assert_success
	default_deny p
	supervised p remap-file-pages
	assert_failure 1
	assert_output "remap-file-pages errno 1 EPERM"
	[ "$(stat_of 'd["totals"]["calls"]["remap_file_pages"]["deny"]')" -ge 1 ]
}

@test "mremap of executable anonymous memory (MAYMOVE, and MAYMOVE|FIXED) is refused under W^X" {
	run "$WL/bypass" mremap-exec <<<"go"
	assert_success
	assert_line --regexp '^mremap-fixed ok '
	# The executable memory is made while the program is exempt (a JIT);
	# then the exemption is dropped at run time and the program tries to
	# move it. (Deny must be there from launch: docs/policy.md.)
	policy allow "{\"version\": 1, \"wx\": \"deny\", \"wx_allow\": [\"$(readlink -f "$WL/bypass")\"]}"
	policy deny '{"version": 1, "wx": "deny"}'
	MV_ARGS=(--policy "$TMP/allow.json" --stats-json "$TMP/s.json")
	start_fed "$WL/bypass" mremap-exec
	ctl policy set "$TMP/deny.json"
	echo go >&7
	stop_fed && rc=0 || rc=$?
	cat "$TMP/out" "$TMP/err"
	[ "$rc" -eq 13 ]
	grep -qx "mremap-maymove errno 13 EACCES" "$TMP/out"
	grep -qx "mremap-fixed errno 13 EACCES" "$TMP/out"
	[ "$(stat_of 'd["totals"]["calls"]["mremap"]["deny"]')" -ge 2 ]
}

@test "io_uring: its rings are mapped with mmap, which the policy sees" {
	run "$WL/bypass" io-uring
	[ "$status" -ne 1 ] || skip "io_uring is disabled here: $output"
	assert_success
	# No io_uring opcode makes a mapping: a ring is usable only once mmap'ed.
	policy p '{"version": 1, "rules": [{"name": "no-shared-file", "syscalls": ["mmap"], "backing": "file",
		"flags_has": ["SHARED"], "action": "deny", "errno": "EPERM"}]}'
	supervised p io-uring
	assert_failure 1
	assert_line --regexp '^io-uring-setup ok'
	assert_line "io-uring-ring-mmap errno 1 EPERM"
	[ "$(stat_of 'd["totals"]["calls"]["mmap"]["deny"]')" -ge 1 ]
}

@test "io_uring: IORING_OP_MADVISE cannot pass a policy on madvise (io_uring is refused there)" {
	run "$WL/bypass" io-uring-madvise
	[ "$status" -ne 1 ] || skip "io_uring is disabled here: $output"
	# Natively the ring's madvise drops the page.
	assert_output "io-uring-madvise ok 0x1"
	policy p '{"version": 1, "rules": [{"name": "no-madvise", "syscalls": ["madvise"], "action": "deny"}]}'
	supervised p io-uring-madvise
	assert_failure 1
	assert_output "io-uring-setup errno 1 EPERM"
	"$MEMVISOR" policy check --explain "$TMP/p.json" | grep -q "io_uring_setup.*refused with EPERM"
	# Where the policy has nothing to say about madvise, io_uring works.
	run "$MEMVISOR" run -- "$WL/bypass" io-uring-madvise
	assert_success
	assert_output "io-uring-madvise ok 0x1"
	# Nor under --notify-all alone: statistics do not change the program.
	run "$MEMVISOR" run --notify-all -- "$WL/bypass" io-uring-madvise
	assert_success
	assert_output "io-uring-madvise ok 0x1"
}

@test "io_uring: a policy on madvise set at run time, over a filter that allows io_uring, is refused" {
	start_idle --notify-all
	policy p '{"version": 1, "rules": [{"name": "no-madvise", "syscalls": ["madvise"], "action": "deny"}]}'
	run ctl policy set "$TMP/p.json"
	assert_failure 1
	assert_output --partial "IORING_OP_MADVISE"
	stop_idle
}

@test "map_shadow_stack, which maps without mmap, falls under the default deny and the limits" {
	# Natively: ENOSYS or EOPNOTSUPP without user shadow stacks, else a
	# mapping; supervised, the filter decides before the kernel does.
	default_deny p
	supervised p map-shadow-stack
	assert_failure 1
	assert_output "map-shadow-stack errno 1 EPERM"
	[ "$(stat_of 'd["totals"]["calls"]["map_shadow_stack"]["deny"]')" -eq 1 ]
	policy m '{"version": 1, "limits": {"max_mapping": "16M"}}'
	supervised m map-shadow-stack
	assert_failure 12
	assert_output "map-shadow-stack errno 12 ENOMEM"
}

@test "process_vm_writev into the program's own code fails (the kernel honours page protections)" {
	run "$WL/bypass" vm-writev-code
	assert_failure 14
	policy wx '{"version": 1, "wx": "deny"}'
	supervised wx vm-writev-code
	assert_failure 14
	assert_output "vm-writev-code errno 14 EFAULT"
}
