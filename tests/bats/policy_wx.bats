#!/usr/bin/env bats
# W^X: refusals, exemptions, log mode, and the known ways around it.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	policy deny '{"version": 1, "wx": "deny"}'
	# memvisor's own checks, without PR_SET_MDWE behind them
	policy deny-nomdwe '{"version": 1, "wx": "deny", "wx_mdwe": false}'
	policy log '{"version": 1, "wx": "log"}'
}

@test "wx deny: an RWX mapping is refused with EACCES" {
	for p in deny deny-nomdwe; do
		run --separate-stderr "$MEMVISOR" run --policy "$TMP/$p.json" -- "$WL/wx_test" rwx-mmap
		assert_failure 13
		assert_output "rwx-mmap errno 13 EACCES"
	done
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/try_syscall" mmap 4096 READ,WRITE,EXEC PRIVATE,ANON
	assert_failure 13
}

@test "wx deny: mprotect(PROT_EXEC) of heap memory is refused" {
	for p in deny deny-nomdwe; do
		run --separate-stderr "$MEMVISOR" run --policy "$TMP/$p.json" --stats-json "$TMP/s.json" -- "$WL/wx_test" heap-exec
		assert_failure 13
		assert_output "heap-exec errno 13 EACCES"
	done
	# memvisor refused it (the kernel would not have, without MDWE), and counted it.
	[ "$(stat_of 'd["totals"]["calls"]["mprotect"]["deny"]')" -eq 1 ]
}

@test "wx deny: a JIT is refused; exempt through wx_allow; allowed with wx off" {
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/wx_test" jit
	assert_failure 13
	printf '{"version": 1, "wx": "deny", "wx_allow": ["%s"]}\n' "$(readlink -f "$WL/wx_test")" >"$TMP/allow.json"
	run "$MEMVISOR" run --policy "$TMP/allow.json" -- "$WL/wx_test" jit
	assert_success
	assert_output "jit 42"
	# Only the named executable: another program under the same policy is refused.
	run "$MEMVISOR" run --policy "$TMP/allow.json" -- "$WL/try_syscall" mmap 4096 READ,WRITE,EXEC PRIVATE,ANON
	assert_failure 13
	run "$MEMVISOR" run -- "$WL/wx_test" jit
	assert_success
}

@test "wx deny: ordinary programs (dynamic linking, python, a shell pipeline) run unchanged" {
	skip_unless_cmd python3
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- python3 -c 'import json, hashlib; print(hashlib.sha1(json.dumps([1,2]).encode()).hexdigest())'
	assert_success
	assert_output "$(python3 -c 'import json, hashlib; print(hashlib.sha1(json.dumps([1,2]).encode()).hexdigest())')"
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- sh -c 'seq 1 1000 | sort -rn | head -1'
	assert_success
	assert_output 1000
}

@test "wx log: the JIT runs, and the breach is counted as log" {
	run "$MEMVISOR" run --policy "$TMP/log.json" --stats-json "$TMP/s.json" -- "$WL/wx_test" jit
	assert_success
	assert_output "jit 42"
	[ "$(stat_of 'd["totals"]["calls"]["mprotect"]["log"]')" -eq 1 ]
}

@test "wx deny: PR_SET_MDWE backs it when nothing is exempt" {
	run "$WL/wx_test" mdwe
	[ "$output" != "mdwe -1" ] || skip "PR_SET_MDWE is not supported by this kernel"
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/wx_test" mdwe
	assert_output "mdwe 1"
	run "$MEMVISOR" run --policy "$TMP/deny-nomdwe.json" -- "$WL/wx_test" mdwe
	assert_output "mdwe 0"
	printf '{"version": 1, "wx": "deny", "wx_allow": ["/usr/bin/node"]}\n' >"$TMP/allow.json"
	run "$MEMVISOR" run --policy "$TMP/allow.json" -- "$WL/wx_test" mdwe
	assert_output "mdwe 0"
}

@test "bypass closed: a memfd mapped writable and then executable" {
	for p in deny deny-nomdwe; do
		run "$MEMVISOR" run --policy "$TMP/$p.json" -- "$WL/wx_test" memfd-double
		assert_failure 13
	done
	run "$MEMVISOR" run -- "$WL/wx_test" memfd-double
	assert_success
}

@test "bypass closed: a file mapped shared-writable and executable, in either order" {
	for p in deny deny-nomdwe; do
		run --separate-stderr "$MEMVISOR" run --policy "$TMP/$p.json" -- "$WL/wx_test" file-double "$TMP/f1.$p"
		assert_failure 13
		assert_output "file-double errno 13 EACCES"
		run --separate-stderr "$MEMVISOR" run --policy "$TMP/$p.json" -- "$WL/wx_test" file-double-rev "$TMP/f2.$p"
		assert_failure 13
		assert_output "file-double-rev errno 13 EACCES"
	done
}

@test "bypass closed: the two halves of a double mapping in two processes" {
	printf 'x%.0s' $(seq 4096) >"$TMP/shared"
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/deny-nomdwe.json" -- python3 -c '
import mmap, os, subprocess, sys
f = open(sys.argv[1], "r+b")
m = mmap.mmap(f.fileno(), 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
r = subprocess.run([sys.argv[2], "file-double-rev", sys.argv[1]], capture_output=True, text=True)
print(r.stdout.strip())
# the other order: something maps it executable first, then we ask for shared-writable
' "$TMP/shared" "$WL/wx_test"
	assert_success
	assert_output "file-double-rev errno 13 EACCES"
}

@test "bypass closed: shmat(SHM_EXEC)" {
	run "$MEMVISOR" run --policy "$TMP/deny-nomdwe.json" -- "$WL/wx_test" shm-exec
	assert_failure 13
	run "$MEMVISOR" run -- "$WL/wx_test" shm-exec
	assert_success
}

@test "bypass closed: personality(READ_IMPLIES_EXEC)" {
	run "$MEMVISOR" run --policy "$TMP/deny-nomdwe.json" -- "$WL/wx_test" personality
	assert_failure 13
	run "$MEMVISOR" run -- "$WL/wx_test" personality
	assert_success
	# An inherited one is cleared before the command starts.
	skip_unless_cmd setarch
	run setarch "$(uname -m)" -X "$MEMVISOR" run --policy "$TMP/deny.json" -- cat /proc/self/personality
	assert_success
	assert_output 00000000
}

@test "bypass closed: writing to /proc/self/mem" {
	run "$WL/wx_test" proc-mem
	assert_success
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/wx_test" proc-mem
	if [ "$status" -eq 0 ]; then
		skip "Landlock is not available here, so /proc/PID/mem stays writable"
	fi
	assert_failure 13
	assert_output "proc-mem errno 13 EACCES"
	# Other writes still work.
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- sh -c "echo hi >$TMP/written && cat $TMP/written && mv $TMP/written $TMP/moved"
	assert_success
	assert_output hi
}

@test "node: the default JIT is refused under deny, works when exempt, --jitless works" {
	skip_unless_cmd node
	node=$(readlink -f "$(command -v node)")
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- node -e 'console.log(6 * 7)'
	assert_failure
	printf '{"version": 1, "wx": "deny", "wx_allow": ["%s"]}\n' "$node" >"$TMP/node.json"
	run "$MEMVISOR" run --policy "$TMP/node.json" -- node -e 'let s = 0; for (let i = 0; i < 1e6; i++) s += i; console.log(s)'
	assert_success
	assert_output 499999500000
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/deny.json" -- node --jitless -e 'console.log(6 * 7)'
	assert_success
	assert_output 42
}

# A program that prints how many of its mappings are writable and
# executable, built into $TMP with extra linker options.
build_rwx_probe() { # NAME CC-ARGS...
	skip_unless_cmd cc
	local name=$1; shift
	cat >"$TMP/probe.c" <<'C'
#include <stdio.h>
int main(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char l[512], p[5];
	int rwx = 0;
	while (f && fgets(l, sizeof(l), f))
		if (sscanf(l, "%*s %4s", p) == 1 && p[0] == 'r' && p[1] == 'w' && p[2] == 'x')
			rwx++;
	printf("ran rwx %d\n", rwx);
	return 0;
}
C
	cc -o "$TMP/$name" "$TMP/probe.c" "$@" 2>/dev/null || skip "cc cannot build with $*"
	run "$TMP/$name"
	[ "$output" = "ran rwx 1" ] || skip "natively $name has no writable+executable mapping: $output"
}

@test "bypass closed: exec of a binary linked with -z execstack (even with MDWE)" {
	build_rwx_probe xstack -z execstack
	for p in deny deny-nomdwe; do
		run "$MEMVISOR" run --policy "$TMP/$p.json" --log-level info -- "$TMP/xstack"
		assert_failure 126
		assert_output --partial "execve denied by wx: exec of a program with an executable stack"
		refute_output --partial "ran rwx"
	done
	# From inside the tree too, through a #! script naming it, and by execveat-less sh.
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- sh -c "\"$TMP/xstack\"; echo rc \$?"
	assert_output --partial "rc 126"
	printf '#!%s\n' "$TMP/xstack" >"$TMP/script"
	chmod +x "$TMP/script"
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$TMP/script"
	assert_failure 126
	# Exempt by wx_allow, and allowed without W^X.
	printf '{"version": 1, "wx": "deny", "wx_allow": ["%s"]}\n' "$TMP/xstack" >"$TMP/allow.json"
	run "$MEMVISOR" run --policy "$TMP/allow.json" -- "$TMP/xstack"
	assert_success
	assert_output "ran rwx 1"
	run "$MEMVISOR" run -- "$TMP/xstack"
	assert_success
	assert_output "ran rwx 1"
}

@test "bypass closed: exec of a binary with a writable and executable PT_LOAD segment" {
	printf '__asm__(".section .rwxdata,\\"awx\\",@progbits\\n.byte 1\\n.previous");\n' >"$TMP/rwx.c"
	build_rwx_probe rwxseg "$TMP/rwx.c"
	for p in deny deny-nomdwe; do
		run "$MEMVISOR" run --policy "$TMP/$p.json" --log-level info -- "$TMP/rwxseg"
		assert_failure 126
		assert_output --partial "execve denied by wx: exec of a program with a writable and executable segment"
	done
	run "$MEMVISOR" run --policy "$TMP/log.json" --stats-json "$TMP/s.json" -- "$TMP/rwxseg"
	assert_success
	[ "$(stat_of 'd["totals"]["calls"]["execve"]["log"]')" -eq 1 ]
	# An ordinary binary is not affected.
	run "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/wx_test" mdwe
	refute_output --partial "Permission denied"
}

@test "refusals are shown: one warning per rule, however many calls, and a count at exit" {
	policy two '{"version": 1, "wx": "deny", "wx_mdwe": false, "rules": [{"name": "big-shared", "syscalls": ["mmap"], "backing": "anon", "flags_has": ["SHARED"], "action": "deny"}]}'
	ts="$WL/try_syscall"
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/two.json" -- sh -c "
		for i in 1 2 3; do $WL/wx_test rwx-mmap; done
		$ts mmap 4096 READ,WRITE SHARED,ANON; $ts mmap 4096 READ,WRITE SHARED,ANON; exit 0"
	assert_success
	[ "$(grep -c 'rwx-mmap errno 13 EACCES' <<<"$output")" -eq 3 ]
	# One line for each rule's first refusal, with the rule, the call,
	# the pid and the command; then the summary; nothing else.
	[ "$(grep -c 'policy rule wx refused' <<<"$stderr")" -eq 1 ]
	[[ "$stderr" =~ "memvisor: warn: policy rule wx refused mmap of pid "[0-9]+" (wx_test): " ]]
	[ "$(grep -c 'policy rule big-shared refused' <<<"$stderr")" -eq 1 ]
	[[ "$stderr" =~ "policy rule big-shared refused mmap of pid "[0-9]+" (try_syscall)" ]]
	[ "$(tail -n 1 <<<"$stderr")" = 'memvisor: warn: 5 calls refused: wx 3, big-shared 2; `memvisor ctl events` or -L info shows each' ]
	[ "${#stderr_lines[@]}" -eq 3 ]
	# A program that dies of its refusal gets the same two lines.
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/wx_test" jit
	assert_failure 13
	[[ "$stderr" == *"policy rule wx refused mprotect of pid "*" (wx_test): "* ]]
	[[ "$stderr" == *"1 call refused: wx 1;"* ]]
}

@test "refusals are shown: nothing when nothing is refused, or with -L error" {
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/deny.json" -- "$WL/try_syscall" mmap 4096 READ,WRITE PRIVATE,ANON
	assert_success
	[ -z "$stderr" ]
	run --separate-stderr "$MEMVISOR" run -L error --policy "$TMP/deny.json" -- "$WL/wx_test" rwx-mmap
	assert_failure 13
	[ -z "$stderr" ]
}
