#!/usr/bin/env bats
# memvisor run: exit status, filtering, workloads, real programs, signals.

load helpers
bats_require_minimum_version 1.5.0

@test "exit status: true is 0, false is 1, exit 7 is 7" {
	run "$MEMVISOR" run -- true
	assert_success
	run "$MEMVISOR" run -- false
	assert_failure 1
	run "$MEMVISOR" run -- sh -c 'exit 7'
	assert_failure 7
}

@test "exit status: killed by SIGTERM is 143" {
	run "$MEMVISOR" run -- sh -c 'kill -TERM $$'
	assert_failure 143
}

@test "exit status: missing command is 127 with a clear message" {
	run -127 "$MEMVISOR" run -- no-such-command-anywhere
	assert_failure 127
	assert_output "memvisor: no-such-command-anywhere: No such file or directory"
}

@test "exit status: non-executable file is 126" {
	echo 'echo hi' >"$TMP/script"
	chmod 644 "$TMP/script"
	run "$MEMVISOR" run -- "$TMP/script"
	assert_failure 126
	assert_output --partial "Permission denied"
}

@test "a script without #! runs through /bin/sh like execvp" {
	printf 'echo from-script "$1"\n' >"$TMP/script"
	chmod 755 "$TMP/script"
	run "$MEMVISOR" run -- "$TMP/script" arg1
	assert_success
	assert_output "from-script arg1"
}

@test "exit status: bad option or no command is 125" {
	run "$MEMVISOR" run --bogus true
	assert_failure 125
	assert_output --partial "unknown option '--bogus'"
	run "$MEMVISOR" run
	assert_failure 125
	assert_output --partial "no command given"
	run "$MEMVISOR" run --log-level loud true
	assert_failure 125
	assert_output --partial "--log-level"
}

@test "--help and --version" {
	run "$MEMVISOR" --version
	assert_success
	assert_output --regexp '^memvisor [0-9]+\.[0-9]+\.[0-9]+$'
	run "$MEMVISOR" --help
	assert_success
	assert_output --partial "run"
	run "$MEMVISOR" run --help
	assert_success
	assert_output --partial "--stats-json"
}

@test "the command runs under a seccomp filter (Seccomp: 2)" {
	run "$MEMVISOR" run -- grep '^Seccomp:' /proc/self/status
	assert_success
	assert_output --regexp '^Seccomp:[[:space:]]+2$'
}

@test "nested supervision is refused with what it means (one listener per filter chain)" {
	# The kernel allows one user-notification listener per filter chain
	# (has_duplicate_listener): the inner memvisor's filter gets EBUSY.
	run "$MEMVISOR" run -- "$MEMVISOR" run -- sh -c 'echo ran'
	assert_failure 125
	assert_output --partial "already under a seccomp user-notification supervisor; nested supervision is not possible"
	refute_output --partial "ran"
	refute_output --partial "Device or resource busy"
}

@test "the command's stdin, stdout, exit code and environment pass through" {
	run bash -c 'echo hello | FOO=bar "$MEMVISOR" run -- sh -c "cat; echo \$FOO; exit 3"'
	assert_failure 3
	assert_output $'hello\nbar'
}

@test "--stats-json counts the calls of a program that maps memory" {
	run "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/mremap_grow" 4
	assert_success
	mmaps=$(json_get "$TMP/s.json" 'd["totals"]["calls"]["mmap"]["allow"]')
	mremaps=$(json_get "$TMP/s.json" 'd["totals"]["calls"]["mremap"]["allow"]')
	[ "$mmaps" -ge 3 ]
	[ "$mremaps" -ge 12 ]
	# Every notification was answered and timed.
	count=$(json_get "$TMP/s.json" 'd["totals"]["service_ns"]["count"]')
	total=$(json_get "$TMP/s.json" 'd["notifications"]')
	[ "$count" -eq "$total" ]
	[ "$(json_get "$TMP/s.json" 'd["exit_status"]')" -eq 0 ]
	# The mremap bytes asked for include the final 4 MiB growth.
	bytes=$(json_get "$TMP/s.json" 'd["totals"]["bytes"]["mremap"]')
	[ "$bytes" -ge 4194304 ]
}

# For the lateparent.py tests: the exit statuses of the records of its
# child (sh -c 'exit 3'), every record with the child's pid counted; and
# how many records of the run have no exit status.
child_statuses() {
	json_get "$TMP/s.json" '[p["exit_status"] for p in d["processes"] if p["pid"] in [c["pid"] for c in d["processes"] if c["cmdline"] == ["sh", "-c", "exit 3"]]]'
}
unknown_statuses() { json_get "$TMP/s.json" 'sum(1 for p in d["processes"] if p["exit_status"] is None)'; }

@test "--stats-json: a child that exited, seen by a query before its parent reaped it, is one process with its exit status" {
	# A query lists the tree below the reaper and took the exited child
	# (a zombie until its parent waits) for a new process: it was
	# recorded twice, and its exit status, asked for by pid, went to the
	# copy; the first record had none. Under a fork storm the status
	# queries of the storm test met such zombies now and then.
	mkfifo "$TMP/go"
	# The parent never reaps the child; the reaper does at the end.
	start_bg --stats-json "$TMP/s.json" -- python3 "$HELPERS/lateparent.py" "$TMP/go" nowait
	running() { [ "$(ctl --json status | json_get - 'd["processes"]')" = "$1" ]; }
	# Each status query scans the tree; once memvisor has seen the child
	# exit, only the parent runs, and the scan finds the zombie (which
	# it took for a new process, running, every time).
	wait_for 20 running 1 || { ctl --json status; return 1; }
	echo go >"$TMP/go"
	wait $MVPID
	child_statuses
	[ "$(child_statuses)" = "[3]" ]
	[ "$(unknown_statuses)" -eq 0 ]
}

@test "--stats-json: a child its parent reaps long after it exited keeps its exit status" {
	# The kernel tells a child's exit status through its pidfd once the
	# child is reaped. memvisor asked again for 5 s; a parent that
	# waited longer (a program busy with something else, a fork storm
	# worker the scheduler kept waiting) left the status unknown.
	mkfifo "$TMP/go"
	start_bg --stats-json "$TMP/s.json" -- python3 "$HELPERS/lateparent.py" "$TMP/go" wait >"$TMP/out"
	wait_for 20 grep -q '^child ' "$TMP/out"
	child=$(awk '/^child /{print $2}' "$TMP/out")
	zombie() { [ "$(awk '/^State:/{print $2}' /proc/"$child"/status 2>/dev/null)" = Z ]; }
	wait_for 20 zombie
	sleep 6
	echo go >"$TMP/go"
	wait $MVPID
	cat "$TMP/out"
	grep -q '^reaped 3$' "$TMP/out"
	child_statuses
	[ "$(child_statuses)" = "[3]" ]
	[ "$(unknown_statuses)" -eq 0 ]
}

@test "--stats-json to an unwritable place fails clearly" {
	run "$MEMVISOR" run --stats-json /nonexistent/dir/s.json -- true
	assert_failure 125
	assert_output --partial "cannot write --stats-json /nonexistent/dir/s.json"
}

@test "workload: 8 threads of mmap/munmap/mremap/mprotect/madvise match native" {
	native=$("$WL/mt_mem")
	run "$MEMVISOR" run -- "$WL/mt_mem"
	assert_success
	assert_output "$native"
}

@test "workload: fork and exec chain 3 deep matches native, every level seen" {
	native=$("$WL/forkexec_chain" 3)
	run "$MEMVISOR" run --stats-json "$TMP/s.json" -- "$WL/forkexec_chain" 3
	assert_success
	assert_output "$native"
	execs=$(json_get "$TMP/s.json" 'sum(p["execs"] for p in d["processes"])')
	[ "$execs" -ge 4 ]
}

@test "workload: exit status propagates up a fork/exec chain" {
	run "$MEMVISOR" run -- "$WL/forkexec_chain" 3 7
	assert_failure 7
}

@test "workload: vfork, posix_spawn and fork match native" {
	native=$("$WL/spawn")
	run "$MEMVISOR" run -- "$WL/spawn"
	assert_success
	assert_output "$native"
}

@test "workload: statically linked binary matches native" {
	native=$("$WL/mem_static")
	run "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/mem_static"
	assert_success
	assert_output "$native"
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["brk"]["allow"]')" -ge 3 ]
}

@test "workload: mremap growth to 64 MiB matches native" {
	native=$("$WL/mremap_grow" 2>/dev/null)
	run --separate-stderr "$MEMVISOR" run -- "$WL/mremap_grow"
	assert_success
	assert_output "$native"
}

@test "an mmap through int 0x80 (i386 ABI) does not bypass the supervisor" {
	"$WL/int80_mmap" >/dev/null 2>&1 && native=0 || native=$?
	[ "$native" -ne 77 ] || skip "IA-32 emulation is disabled on this kernel"
	run "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/int80_mmap"
	assert_success
	assert_output "int80 mmap2 ok"
	[ "$(json_get "$TMP/s.json" 'd["totals"]["abi"]["i386"]')" -ge 1 ]
	[ "$(json_get "$TMP/s.json" 'd["totals"]["calls"]["mmap2"]["allow"]')" -ge 1 ]
}

@test "real program: python3 with a multiprocessing pool (fork)" {
	skip_unless_cmd python3
	same_as_native python3 -c '
import multiprocessing as mp, hashlib
mp.set_start_method("fork")
def f(i): return hashlib.sha256(bytes(i % 256 for _ in range(100000))).hexdigest()
with mp.Pool(4) as p: print(hashlib.sha256("".join(p.map(f, range(40))).encode()).hexdigest())
x = bytearray(64 << 20); x[::4096] = b"x" * len(x[::4096]); print(sum(x[::4096]))
'
}

@test "real program: bash with subshells and pipes" {
	same_as_native bash -c 'x=$( (for i in $(seq 1 200); do echo $i; done) | sort -n | tail -3 | tr "\n" " "); echo "$x"; (exit 4); echo $?; echo done | cat | cat'
}

@test "real program: perl" {
	skip_unless_cmd perl
	same_as_native perl -e 'my %h; $h{$_} = "x" x $_ for 1..2000; my $s = 0; $s += length $h{$_} for keys %h; print "$s\n"; exit 3'
}

@test "real program: gcc compiles and the result runs" {
	skip_unless_cmd gcc
	printf '#include <stdio.h>\nint main(void){puts("compiled ok");return 5;}\n' >"$TMP/p.c"
	run "$MEMVISOR" run -- gcc -O2 -o "$TMP/p" "$TMP/p.c"
	assert_success
	run "$TMP/p"
	assert_failure 5
	assert_output "compiled ok"
}

@test "real program: sqlite3" {
	skip_unless_cmd sqlite3
	same_as_native sqlite3 :memory: 'create table t(a); with recursive c(x) as (select 1 union all select x+1 from c where x<50000) insert into t select x from c; select count(*), sum(a) from t;'
}

@test "real program: git" {
	skip_unless_cmd git
	git init -q "$TMP/repo"
	echo content >"$TMP/repo/f"
	git -C "$TMP/repo" add f
	same_as_native git -C "$TMP/repo" -c user.name=t -c user.email=t@e -c core.hooksPath=/dev/null status --porcelain
}

@test "an unprivileged user can supervise a program" {
	require_root "needs root to switch to nobody"
	cp "$MEMVISOR" "$WL/mt_mem" "$TMP/"
	chmod 755 "$TMP/memvisor" "$TMP/mt_mem"
	mkdir "$TMP/out"
	chown nobody "$TMP/out"
	native=$("$WL/mt_mem" 4 2)
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- env XDG_RUNTIME_DIR="$TMP/out" \
		"$TMP/memvisor" run --notify-all --stats-json "$TMP/out/s.json" -- "$TMP/mt_mem" 4 2
	assert_success
	assert_output "$native"
	[ "$(json_get "$TMP/out/s.json" 'd["totals"]["calls"]["mmap"]["allow"]')" -ge 8 ]
	# It really ran as nobody, under the filter.
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- env XDG_RUNTIME_DIR="$TMP/out" "$TMP/memvisor" run -- \
		sh -c 'id -un; grep "^Seccomp:" /proc/self/status'
	assert_success
	assert_line nobody
	assert_line --regexp '^Seccomp:[[:space:]]+2$'
}

@test "SIGKILL to memvisor: no supervised process survives a second" {
	"$MEMVISOR" run -- sh -c 'sleep 300 & sleep 300 & (sleep 300 &) ; wait' &
	mv=$!
	remember_pid $mv
	wait_for 5 sh -c "[ \$(cat /proc/$mv/task/*/children | wc -w) -ge 1 ] && pgrep -f 'sleep 300' >/dev/null"
	sleep 0.3
	kids=$(descendants $mv)
	[ -n "$kids" ]
	kill -9 $mv
	sleep 1
	none_alive $kids
}

@test "memvisor waits for descendants, and --kill-descendants ends them" {
	start=$SECONDS
	run "$MEMVISOR" run -- sh -c 'sleep 1 & echo started'
	assert_success
	[ $((SECONDS - start)) -ge 1 ]
	# By pid: a "sleep 300" of another test run on the machine is not ours.
	run timeout 10 "$MEMVISOR" run --kill-descendants --kill-grace 0.2 -- sh -c 'sleep 300 & echo started $!'
	assert_success
	assert_output --regexp '^started [0-9]+$'
	! kill -0 "${output#started }" 2>/dev/null
}

@test "--kill-descendants escalates to SIGKILL after the grace period" {
	run timeout 10 "$MEMVISOR" run --kill-descendants --kill-grace 0.3 -- \
		sh -c '(trap "" TERM; exec sleep 301) & sleep 0.2; echo started $!'
	assert_success
	assert_output --regexp '^started [0-9]+$'
	! kill -0 "${output#started }" 2>/dev/null
}

@test "SIGTERM and SIGUSR1 sent to memvisor reach the command" {
	"$MEMVISOR" run -- sh -c 'trap "echo got-term; exit 3" TERM; echo ready; while :; do sleep 0.05; done' >"$TMP/out" &
	mv=$!
	remember_pid $mv
	wait_for 5 grep -q ready "$TMP/out"
	kill -TERM $mv
	wait $mv && rc=0 || rc=$?
	[ "$rc" -eq 3 ]
	grep -q got-term "$TMP/out"
	"$MEMVISOR" run -- sleep 30 &
	mv=$!
	remember_pid $mv
	# Its own command, exactly: -f alone also matched another test's
	# "sleep 300" (rb_target's exec).
	wait_for 5 pgrep -x -f 'sleep 30' >/dev/null
	kill -USR1 $mv
	wait $mv && rc=0 || rc=$?
	[ "$rc" -eq $((128 + 10)) ]
}

# The reaper tells memvisor its command's pid once it forked it; a
# signal memvisor got before that was dropped (a SIGTERM right after
# `memvisor run` did nothing). reaper_start_stall holds that message
# back 2 s while the command runs.
@test "a signal memvisor gets before it knows its command's pid reaches the command" {
	MEMVISOR_FAULT=reaper_start_stall "$MEMVISOR" run -- sleep 30 2>"$TMP/err" &
	mv=$!
	remember_pid $mv
	wait_for 10 grep -q "fault injected at reaper_start_stall" "$TMP/err"
	kill -TERM $mv
	wait $mv && rc=0 || rc=$?
	cat "$TMP/err"
	[ "$rc" -eq 143 ]
}

@test "a signal the command sends to its own process group is not delivered twice" {
	# The command's group includes memvisor; forwarding would double it.
	# setsid: the group signal must not reach the test runner.
	run setsid -w "$MEMVISOR" run -- bash -c 'n=0; trap "n=\$((n+1))" USR1; kill -USR1 0; sleep 0.3; echo $n'
	assert_success
	assert_output 1
}

@test "--log writes a log file at the chosen level" {
	run "$MEMVISOR" run --log "$TMP/log" --log-level debug -- true
	assert_success
	grep -q "exited" "$TMP/log"
	run "$MEMVISOR" run --log /nonexistent/dir/log -- true
	assert_failure 125
	assert_output --partial "cannot open log file"
}

# What memvisor wrote on the program's stderr, $TMP/err (but the fault
# points' own notes, which a run without MEMVISOR_FAULT never has).
memvisor_lines() { grep '^memvisor:' "$TMP/err" | grep -v ': fault injected at ' || true; }

# Under memvisor (MV_ARGS), with uffd_register and ckpt_stall failing:
# an evict that leaves a region resident (and its reload), then a
# checkpoint that fails while the program is killed; the program's
# stderr is $TMP/err, the event stream $TMP/events.
job_outcomes() {
	rm -rf "$TMP/img1" "$TMP/img2" "$TMP/log"
	export MEMVISOR_FAULT=uffd_register:1,ckpt_stall:2
	start_fed "$WL/reload_wl" --file "$TMP/F" --mib 8
	unset MEMVISOR_FAULT
	ctl --json events >"$TMP/events" 7>&- &
	remember_pid $!
	run ctl checkpoint "$TMP/img1" --evict --wait
	assert_success
	assert_output --partial "UFFDIO_REGISTER"
	run ctl reload "$TMP/img1" --wait
	assert_success
	ctl checkpoint "$TMP/img2" --wait >"$TMP/ck2" 2>&1 7>&- &
	remember_pid $!
	# Held stopped by the stall: the program ends meanwhile.
	wait_for 10 grep -q '^TracerPid:[[:space:]]*[1-9]' /proc/"$PID"/status
	kill -9 "$PID"
	st=0
	stop_fed || st=$?
	[ "$st" -eq 137 ]
	grep -q '"state":"failed"' "$TMP/events"
	grep -q 'UFFDIO_REGISTER' "$TMP/events"
}

@test "the outcome of a job is its client's, the events' and --log's, not the program's stderr (but with -L info)" {
	skip_unless_uffd
	MV_ARGS=()
	job_outcomes
	cat "$TMP/err"
	[ -z "$(memvisor_lines)" ]

	MV_ARGS=(--log "$TMP/log")
	job_outcomes
	[ -z "$(memvisor_lines)" ]
	grep -q 'warn: evict: process [0-9]*: registering .* left resident' "$TMP/log"
	grep -q 'warn: checkpoint job 3 failed: ' "$TMP/log"

	# Asked for: on stderr.
	MV_ARGS=(-L info)
	job_outcomes
	grep -q '^memvisor: warn: evict: process [0-9]*: registering .* left resident' "$TMP/err"
	grep -q '^memvisor: warn: checkpoint job 3 failed: ' "$TMP/err"
}

@test "every thread's calls are counted on its process" {
	run "$MEMVISOR" run --notify-all --stats-json "$TMP/s.json" -- "$WL/mt_mem" 8 8
	assert_success
	total=$(json_get "$TMP/s.json" 'sum(p["stats"]["total"] for p in d["processes"])')
	[ "$total" -eq "$(json_get "$TMP/s.json" 'd["notifications"]')" ]
	# mt_mem's own process made at least 8 threads' worth of mmaps.
	[ "$(json_get "$TMP/s.json" '[p for p in d["processes"] if p["exe"].endswith("mt_mem")][0]["stats"]["calls"]["mmap"]["allow"]')" -ge 64 ]
}

@test "an exec's path is read without unsharing the copy-on-write page it lies in" {
	# The path was read with process_vm_readv, whose read pin gives a
	# forked child its own copy of a page it shares with its parent.
	run "$WL/cow_exec"
	assert_success
	assert_output "exclusive 0"
	run "$MEMVISOR" run -- "$WL/cow_exec"
	assert_success
	assert_output "exclusive 0"
}

# run --until-point read:0 notifies every read of stdin, exit and
# exit_group: with no rollback running they are answered at once, and
# programs read their input, start and end threads, and exit as without.
@test "run --until-point: programs read stdin, end threads and exit as without it" {
	sh_prog='while read -r l; do echo "<$l>"; done; (exit 3); echo "sub $?"; exit 4'
	printf 'a\nb b\n\nc\n' >"$TMP/lines"
	want=$(sh -c "$sh_prog" <"$TMP/lines" || echo "status $?")
	got=$("$MEMVISOR" run --until-point read:0 -- sh -c "$sh_prog" <"$TMP/lines" || echo "status $?")
	[ "$got" = "$want" ]
	[[ $got == *"status 4" ]]
	py='import sys, threading
ts = [threading.Thread(target=lambda: None) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
d = sys.stdin.buffer.read()
print(len(d), sum(d) % 9973)
sys.exit(5)'
	head -c 300000 /dev/urandom >"$TMP/r"
	want=$(python3 -c "$py" <"$TMP/r" || echo "status $?")
	got=$("$MEMVISOR" run --until-point read:0 -- python3 -c "$py" <"$TMP/r" || echo "status $?")
	[ "$got" = "$want" ]
	[[ $got == *"status 5" ]]
	"$MEMVISOR" run --until-point read:0 -- cat <"$TMP/r" | cmp - "$TMP/r"
	# Threads that call exit(2) themselves, and the last one ends the process.
	run "$MEMVISOR" run --until-point read:0 -- "$WL/mt_mem" 8 8
	assert_success
}
