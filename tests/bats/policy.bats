#!/usr/bin/env bats
# Policies: rules, actions, limits, the kernel-side fast path.

load helpers
bats_require_minimum_version 1.5.0

@test "policy check: a valid policy and the shipped examples pass" {
	policy ok '{"version": 1, "rules": [{"syscalls": ["mmap"], "action": "allow"}]}'
	run "$MEMVISOR" policy check "$TMP/ok.json"
	assert_success
	assert_output "$TMP/ok.json: ok"
	for f in "$ROOT"/policy/examples/*.json; do
		run "$MEMVISOR" policy check "$f"
		assert_success
	done
}

@test "policy check --explain: what stays in the kernel and what is notified" {
	policy wx '{"version": 1, "wx": "deny"}'
	run "$MEMVISOR" policy check --explain "$TMP/wx.json"
	assert_success
	assert_line --regexp '^  mprotect +notified when prot & 0x4 == 0x4 \(wx\)$'
	assert_line --regexp '^  in the kernel: +munmap, '
}

@test "rule: a denied mmap shape returns the chosen errno, other shapes pass" {
	policy p '{"version": 1, "rules": [{"name": "no-big-anon", "syscalls": ["mmap"],
		"backing": "anon", "length_min": "1M", "action": "deny", "errno": "E2BIG"}]}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- \
		"$WL/try_syscall" mmap 1M READ,WRITE PRIVATE,ANON
	assert_failure 7
	assert_output "errno 7 E2BIG"
	[ "$(stat_of 'd["totals"]["calls"]["mmap"]["deny"]')" -eq 1 ]
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 1048575 READ,WRITE PRIVATE,ANON
	assert_success
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 2M READ PRIVATE "$WL/try_syscall"
	assert_success
}

@test "rule: deny without errno is EPERM; first matching rule wins" {
	policy p '{"version": 1, "rules": [
		{"syscalls": ["mprotect"], "prot_has": ["WRITE"], "length_max": 4096, "action": "allow"},
		{"syscalls": ["mprotect"], "prot_has": ["WRITE"], "action": "deny"}]}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mprotect 8192 READ,WRITE
	assert_failure 1
	assert_output "errno 1 EPERM"
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mprotect 4096 READ,WRITE
	assert_success
}

@test "rule: log allows and counts; kill ends the process" {
	policy p '{"version": 1, "rules": [
		{"syscalls": ["madvise"], "action": "log"},
		{"syscalls": ["mlock"], "action": "kill"}]}'
	run "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- \
		"$WL/try_syscall" madvise 4096 DONTNEED
	assert_success
	[ "$(stat_of 'd["totals"]["calls"]["madvise"]["log"]')" -eq 1 ]
	run "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- \
		"$WL/try_syscall" mlock 4096
	assert_failure 137
	[ "$(stat_of 'd["totals"]["calls"]["mlock"]["kill"]')" -eq 1 ]
}

@test "rule: default deny applies to memory calls, not to process lifecycle" {
	policy p '{"version": 1, "default": {"action": "deny", "errno": "ENOMEM"},
		"rules": [{"syscalls": ["mmap", "brk", "mprotect", "munmap"], "action": "allow"}]}'
	run "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" madvise 4096 DONTNEED
	assert_failure 12
	run "$MEMVISOR" run --policy "$TMP/p.json" -- sh -c 'true && echo forked-and-exec-ed'
	assert_success
	assert_output forked-and-exec-ed
}

@test "a denied brk returns the unchanged break, as the kernel does" {
	policy p '{"version": 1, "rules": [{"syscalls": ["brk"], "action": "deny"}]}'
	# try_syscall reports a break that did not move as ENOMEM (glibc's view).
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" brk 64K
	assert_failure 12
	assert_output "errno 12 ENOMEM"
	# The break it got back is where the break was (not 0, not an errno).
	[[ "$stderr" =~ left\ the\ break\ at\ 0x[0-9a-f]{4,} ]]
	# malloc falls back to mmap and the program runs on.
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- python3 -c 'print(len(bytearray(1 << 20)))'
	assert_success
	assert_output 1048576
}

@test "max_mapped: python gets MemoryError past the limit and exits normally" {
	skip_unless_cmd python3
	policy p '{"version": 1, "limits": {"max_mapped": "256M"}}'
	prog='
try:
    x = bytearray(400 << 20)
    print("allocated")
except MemoryError:
    print("MemoryError")
y = bytearray(64 << 20)
print("still alive", len(y) >> 20)'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- python3 -c "$prog"
	assert_success
	assert_output $'MemoryError\nstill alive 64'
	# The same with every call notified: memvisor refuses first, and counts it.
	run --separate-stderr "$MEMVISOR" run --notify-all --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- python3 -c "$prog"
	assert_success
	assert_output $'MemoryError\nstill alive 64'
	[ "$(stat_of 'd["totals"]["calls"]["mmap"]["deny"]')" -ge 1 ]
}

@test "max_mapped: the exact limit fits, one byte over does not (RLIMIT_AS)" {
	policy p '{"version": 1, "limits": {"max_mapped": "1G"}}'
	run "$MEMVISOR" run --policy "$TMP/p.json" -- sh -c 'ulimit -v'
	assert_success
	assert_output 1048576
	# The command cannot lift it.
	run "$MEMVISOR" run --policy "$TMP/p.json" -- sh -c 'ulimit -v unlimited'
	assert_failure
	run "$MEMVISOR" run --policy "$TMP/p.json" -- python3 -c '
import mmap, re
def vm():
    return int(re.search(r"VmSize:\s+(\d+)", open("/proc/self/status").read()).group(1)) << 10
room = (1 << 30) - vm() - (1 << 20)   # leave a MiB for the interpreter itself
m = mmap.mmap(-1, room)
rest = (1 << 30) - vm()
try:
    mmap.mmap(-1, rest + 1); print("over: mapped")
except OSError as e:
    print("over:", e.errno)
print("exact:", len(mmap.mmap(-1, rest)) == rest)'
	assert_success
	assert_output $'over: 12\nexact: True'
}

@test "max_mapping: a mapping of exactly the limit passes, one byte more is ENOMEM" {
	# (It applies to every mapping, the C library's own included.)
	policy p '{"version": 1, "limits": {"max_mapping": "64M"}}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 64M READ PRIVATE,ANON
	assert_success
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 67108865 READ PRIVATE,ANON
	assert_failure 12
	assert_output "errno 12 ENOMEM"
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mremap 4096 67108865 MAYMOVE
	assert_failure 12
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/try_syscall" mmap 0x7ffffffffffff001 READ PRIVATE,ANON
	assert_failure 12
}

@test "max_mapped: RLIMIT_AS cannot be lifted with high bits set in the resource number" {
	policy p '{"version": 1, "limits": {"max_mapped": "1G"}}'
	for how in prlimit64 setrlimit; do
		run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/rlimit_hi" "$how"
		assert_failure 1
		assert_output "$how errno 1 EPERM"
	done
}

@test "max_regions: a process never has more regions than the limit" {
	policy p '{"version": 1, "limits": {"max_regions": 100}}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- "$WL/region_fill" 1000
	assert_success
	assert_output --regexp '^made [0-9]+, stopped by ENOMEM, regions 100$'
}

# Split regions by HOW (region_calls) under max_regions 100: the calls
# outside mmap/mprotect must be counted too.
regions_by() { # HOW
	policy p '{"version": 1, "limits": {"max_regions": 100}}'
	run "$WL/region_calls" "$1" 300
	[ "$status" -ne 77 ] || skip "$1: not supported by this kernel ($output)"
	assert_output --regexp '^made 300, stopped by none, regions [0-9]+$'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- "$WL/region_calls" "$1" 300
	assert_success
	assert_output --regexp '^made [0-9]+, stopped by ENOMEM, regions (9[0-9]|100)$'
}

@test "max_regions: mbind splitting a mapping is counted (Linux 2.6.7)" {
	regions_by mbind
}

@test "max_regions: mseal splitting a mapping is counted (Linux 6.10)" {
	regions_by mseal
}

@test "max_regions: UFFDIO_REGISTER splitting a mapping is counted (Linux 4.3)" {
	regions_by uffd
}

@test "max_regions: PR_SET_VMA_ANON_NAME splitting a mapping is counted (Linux 5.17)" {
	regions_by anon_name
}

@test "max_regions: io_setup mapping AIO rings is counted (Linux 2.6)" {
	regions_by io_setup
}

@test "max_regions: madvise with high bits set in its int advice is still counted" {
	policy p '{"version": 1, "limits": {"max_regions": 100}}'
	# MADV_DONTFORK (10) | 1 << 32: the kernel reads an int and splits.
	run "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- "$WL/try_syscall" madvise 8192 0x10000000a
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["madvise"]["allow"]')" -ge 1 ]
}

@test "max_mapped_tree: the limit holds across forked children" {
	policy p '{"version": 1, "limits": {"max_mapped_tree": "200M"}}'
	"$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- \
		"$WL/tree_alloc" 3 100 4 3 >"$TMP/out" &
	mv=$!
	remember_pid $mv
	wait_for 10 grep -q '^total' "$TMP/out"
	# While the children hold their memory, sum what the kernel says the
	# tree maps.
	sum=0
	for p in $(descendants $mv); do
		[ "$(cat /proc/$p/comm 2>/dev/null)" = tree_alloc ] || continue
		kb=$(awk '/^VmSize/ {print $2}' /proc/$p/status)
		sum=$((sum + kb))
	done
	wait $mv
	cat "$TMP/out"
	grep -q '^child 0: 100 MiB$' "$TMP/out"
	grep -q '(ENOMEM)' "$TMP/out"
	echo "tree maps $sum KiB"
	[ "$sum" -le $((200 * 1024)) ]
	# and it was full: one more 4 MiB chunk would not have fit
	[ "$sum" -gt $((196 * 1024)) ]
	[ "$(stat_of 'd["totals"]["verdicts"]["deny"]')" -ge 2 ]
}

@test "max_mapped_tree: a fork that would not fit fails with ENOMEM" {
	skip_unless_cmd python3
	policy p '{"version": 1, "limits": {"max_mapped_tree": "300M"}}'
	run --separate-stderr "$MEMVISOR" run --policy "$TMP/p.json" -- python3 -c '
import mmap, os
m = mmap.mmap(-1, 200 << 20)
try:
    pid = os.fork()
except OSError as e:
    print("fork:", e.errno); raise SystemExit(0)
if pid == 0: os._exit(0)
os.waitpid(pid, 0); print("forked")'
	assert_success
	assert_output "fork: 12"
}

@test "fast path: under a W^X policy munmap stays in the kernel; --notify-all sees it" {
	policy p '{"version": 1, "wx": "deny"}'
	run "$MEMVISOR" run --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- "$WL/try_syscall" munmap 4096
	assert_success
	[ "$(stat_of 'd["totals"]["calls"].get("munmap", {}).get("allow", 0)')" -eq 0 ]
	run "$MEMVISOR" run --notify-all --policy "$TMP/p.json" --stats-json "$TMP/s.json" -- \
		"$WL/try_syscall" munmap 4096
	assert_success
	[ "$(stat_of 'd["totals"]["calls"]["munmap"]["allow"]')" -ge 1 ]
}

@test "fast path: without a policy, programs run as natively and execs are still seen" {
	run "$MEMVISOR" run --stats-json "$TMP/s.json" -- "$WL/forkexec_chain" 3
	assert_success
	[ "$(stat_of 'sum(p["execs"] for p in d["processes"])')" -ge 4 ]
	[ "$(stat_of 'd["totals"]["calls"].get("mmap", {}).get("allow", 0)')" -eq 0 ]
}
