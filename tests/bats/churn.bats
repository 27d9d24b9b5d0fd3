#!/usr/bin/env bats
# Churn (issue 11): real programs evicted and reloaded over and over while
# they run (tests/churn/churn.py); their output and exit status must be
# those of a native run. Each test runs its program natively once, then
# under memvisor for CHURN_SECONDS (default 2: a supervised run or two;
# make soak sets more), and prints the seed first: CHURN_SEED=N replays it (docs/reliability.md,
# "Churn").

load helpers
bats_require_minimum_version 1.5.0

CHURN=$ROOT/tests/churn
: "${CHURN_SECONDS:=2}"
export CHURN_SECONDS

setup() {
	setup_tmp
	skip_unless_uffd
}

teardown() {
	teardown_tmp
}

# userfaultfd(2) must work for the supervised program (root here, or
# vm.unprivileged_userfaultfd=1), as in reload.bats.
skip_unless_uffd() {
	local v
	v=$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null) || skip "no userfaultfd in this kernel"
	[ "$(id -u)" = 0 ] || [ "$v" = 1 ] || skip "userfaultfd needs root or vm.unprivileged_userfaultfd=1"
}

# The interpreter itself, not a version manager's shim script.
python_bin() { python3 -c 'import sys; print(sys.executable)'; }

# churn NAME [--kill] -- PROGRAM [ARG]...: the driver's report is the
# test's output (shown on failure, and by make soak).
churn() {
	local name=$1
	shift
	python3 "$CHURN/churn.py" --name "$name" --workdir "$TMP" "$@"
}

@test "churn: C program, patterns on stacks, heaps and shared memory in processes and threads" {
	churn pattern -- "$WL/churn_pattern" --rounds 400
}

@test "churn: python3 multiprocessing fork pool and threads" {
	skip_unless_cmd python3
	churn python-pool -- "$(python_bin)" "$CHURN/pool.py" 8
}

@test "churn: perl, a large string and regexes" {
	skip_unless_cmd perl
	churn perl -- perl "$CHURN/strings.pl" 5
}

@test "churn: make -j2 compiling generated C files, then the program" {
	skip_unless_cmd make
	skip_unless_cmd cc
	"$CHURN/make_project.sh" gen "$TMP/proj" 36
	churn make -- bash "$CHURN/make_project.sh" build "$TMP/proj" 3
}

@test "churn: bash with subshells, pipes and background jobs" {
	churn bash -- bash "$CHURN/shell.sh" 20
}

@test "churn: node" {
	skip_unless_cmd node
	churn node -- node "$CHURN/objects.js" 20
}

@test "churn: sqlite3 with an in-memory database" {
	skip_unless_cmd sqlite3
	churn sqlite -- sqlite3 :memory: ".read $CHURN/queries.sql" ".read $CHURN/queries.sql"
}

# A program that serves its own faults with userfaultfd, as the kernel
# selftest uffd-stress does; an evict leaves the range it registered
# resident (issue 24). --linger-ms: it goes on in that range after it
# dropped the source, where an evict finds only that range.
@test "churn: C program serving its own userfaultfd (uffd-stress)" {
	churn uffd-stress -- "$WL/uffd_stress" --bounces 300 --linger-ms 5
}

# The kernel's own accesses (docs/reload.md, "What the kernel touches"):
# io_uring reads and writes registered buffers through their pin, and
# holds a memfd in its file table; the file in $TMP, O_DIRECT where the
# file system takes it.
@test "churn: io_uring with registered buffers and files" {
	skip_unless_uring
	churn uring -- "$WL/churn_uring" --rounds 400 --dir "$TMP"
}

# The kernel marks a dead owner's robust mutexes and clears a thread's
# exit word for pthread_join from the exiting thread, where a
# userfaultfd does not wait.
@test "churn: processes and threads that die holding robust mutexes" {
	churn robust -- "$WL/churn_robust" --procs 4 --rounds 1000 --threads 3 --ops 1000
}

# checkpoint --live over and over (tests/bats/live.bats checks the images;
# these check the programs): write-protect faults, the fallback when memory
# is unmapped during the copy, threads and forks, and the output must be a
# native run's.
@test "churn --live: C program, patterns on stacks, heaps and shared memory in processes and threads" {
	churn pattern-live --live -- "$WL/churn_pattern" --rounds 400
}

@test "churn --live: node" {
	skip_unless_cmd node
	churn node-live --live -- node "$CHURN/objects.js" 20
}

# checkpoint --evict --live over and over with reloads: pages written
# during the copy must stay, the others are dropped and served back.
@test "churn --live-evict: C program, patterns on stacks, heaps and shared memory in processes and threads" {
	churn pattern-live-evict --live-evict -- "$WL/churn_pattern" --rounds 400
}

@test "churn --live-evict: python3 multiprocessing fork pool and threads" {
	skip_unless_cmd python3
	churn python-live-evict --live-evict -- "$(python_bin)" "$CHURN/pool.py" 8
}

@test "churn --live-evict: robust mutexes held by processes and threads that die" {
	churn robust-live-evict --live-evict -- "$WL/churn_robust" --procs 4 --rounds 1000 --threads 3 --ops 1000
}

# Marks and rollbacks between the evicts and reloads (issue 26): at each
# rollback, held at the mark, every readable private page of the program
# must be the mark's and its layout too; the output, with what it printed
# between each mark and its rollback cut out, must be a native run's.
# Programs of one process whose outcome depends on nothing a rollback
# leaves alone (tests/churn/churn.py, --rollback). perl and sqlite3 load
# modules and read their script through descriptors they close since.
# perl runs with memvisor's stop point in its filter (run --until-point
# read:0: its reads of stdin and its exits notified, answered at once).
@test "churn --rollback: perl, marks and rollbacks between evicts, each checked page by page" {
	skip_unless_cmd perl
	skip_unless_wp_async
	churn perl-rollback --rollback --until-point read:0 -- perl "$CHURN/strings.pl" 3
}

@test "churn --rollback: sqlite3 reading its script, marks and rollbacks between evicts" {
	skip_unless_cmd sqlite3
	skip_unless_wp_async
	churn sqlite-rollback --rollback -- sqlite3 :memory: ".read $CHURN/queries.sql" ".read $CHURN/queries.sql"
}

# The same as a kernel before 6.7 tracks (MEMVISOR_ROLLBACK_WP=sync:
# synchronous write-protect faults, .data put back whole).
@test "churn --rollback: perl, writes tracked by synchronous faults" {
	skip_unless_cmd perl
	skip_unless_wp_async
	MEMVISOR_ROLLBACK_WP=sync churn perl-rollback-sync --rollback -- perl "$CHURN/strings.pl" 3
}

# A tree: sh waiting for perl. A mark without --pid is of both (the
# rollback puts both back; each is checked page by page); perl's exit
# ends the run's marks (a rollback cannot revive it).
@test "churn --rollback: perl under sh, the tree marked and rolled back" {
	skip_unless_cmd perl
	skip_unless_wp_async
	run churn sh-perl-rollback --rollback -- sh -c "perl '$CHURN/strings.pl' 3; true"
	echo "$output"
	assert_success
	[[ $output =~ rollbacks\ checked\ \(([0-9]+)\ of\ a\ tree\) ]]
	[ "${BASH_REMATCH[1]}" -gt 0 ]
}

# node's threads (its rseq areas among them) make each run minutes long
# under rollbacks: in make soak only.
@test "churn --rollback: node and its threads, marks and rollbacks between evicts" {
	skip_unless_cmd node
	skip_unless_wp_async
	[ "$CHURN_SECONDS" -ge 30 ] || skip "minutes a run: in make soak (CHURN_SECONDS >= 30)"
	churn node-rollback --rollback -- node "$CHURN/objects.js" 20
}

# memvisor SIGKILLed during an evict or a reload: the program dies with it,
# has printed nothing a native run does not, and no process is left.
# (--skip-wipe: the wipe-on-fork check belongs to the first test.)
@test "churn: memvisor SIGKILLed during an evict or a reload (C program)" {
	CHURN_SECONDS=$((CHURN_SECONDS / 2 + 1)) churn pattern-kill --kill -- "$WL/churn_pattern" --rounds 400 --skip-wipe
}

@test "churn: memvisor SIGKILLed during an evict or a reload (python3 pool)" {
	skip_unless_cmd python3
	CHURN_SECONDS=$((CHURN_SECONDS / 2 + 1)) churn python-kill --kill -- "$(python_bin)" "$CHURN/pool.py" 8
}
