#!/usr/bin/env bats
# Evict and reload (issue 6): memory dropped into an image and served back
# on demand and in the background, while the program runs and checks it.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	skip_unless_uffd
}

# The loader and the fault service may keep a loaded machine's workload
# from answering for a while.
SAY_SECONDS=120

# Start reload_wl under memvisor (start_fed); WRAP=1 wraps it in a shell
# that stays after it exits.
start() {
	local wrap=()
	[ -z "$WRAP" ] || wrap=(sh -c '"$0" "$@"; sleep 60')
	start_fed "${wrap[@]}" "$WL/reload_wl" --file "$TMP/F" "$@"
}

# Where each thread of $PID waits, what memvisor said, and its evicted spaces.
where_waits() {
	local t
	for t in /proc/"$PID"/task/*; do
		echo "thread ${t##*/}: $(cat "$t/wchan" 2>/dev/null)"
		cat "$t/stack" 2>/dev/null
	done
	cat "$TMP/err"
	ctl --json status
}

evict() { # DIR
	run ctl --json checkpoint "$1" --evict --wait
	assert_success
	echo "$output" | tail -1 >"$TMP/evict.json"
}

# `ctl --json CTL-ARGS... --wait` succeeds; how the job ended is in
# $TMP/job.json.
wait_job() { # CTL-ARGS...
	run ctl --json "$@" --wait
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
}

job_of() { json_get "$1" 'd["job"]'; } # FILE, or - for stdin

# The run's output without evict, for comparison.
native_out() { # COMMANDS...
	printf '%s\n' "$@" | "$WL/reload_wl" --file "$TMP/F2" 2>/dev/null
}

@test "reload: evicted memory drops, is checked while evicted and reloading, comes back equal" {
	start --mib 64
	say sum '^sum '
	before=$LAST
	rss0=$(proc_kb "$PID" RssAnon)
	evict "$TMP/img"
	rss1=$(proc_kb "$PID" RssAnon)
	echo "RssAnon before $rss0 kB, after evict $rss1 kB"
	[ "$rss1" -lt $((rss0 / 20)) ]
	say loop '^looping$'
	run json_get "$TMP/evict.json" 'd["result"]["evicted"]["regions"] > 0'
	assert_output True
	say check '^ok$'
	ctl --json reload "$TMP/img" --rate 64 >"$TMP/reload.json"
	say check '^ok$'
	wait_job job "$(job_of "$TMP/reload.json")"
	run json_get "$TMP/job.json" 'd["result"]["pages_loaded"] == d["result"]["pages_total"] > 0'
	assert_output True
	say unloop '^loop ok$'
	say sum '^sum '
	[ "$LAST" = "$before" ]
	rss2=$(proc_kb "$PID" RssAnon)
	[ "$rss2" -ge $((rss0 * 9 / 10)) ]
	run ctl --json status
	assert_output --partial '"evicted":[]'
	stop_fed
	expected=$(native_out sum loop check check unloop sum)
	echo "$expected" 
	diff <(printf '%s\n' "$expected") <(cat "$TMP/out")
}

@test "reload: ranges that had transparent huge pages have them again after the reload" {
	grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null &&
		skip "transparent huge pages are off"
	start --mib 32 --thp
	huge0=$(proc_kb "$PID" AnonHugePages smaps_rollup)
	[ "$huge0" -gt 0 ] || skip "no huge page was allocated for the workload"
	say sum '^sum '
	before=$LAST
	evict "$TMP/img"
	[ "$(proc_kb "$PID" AnonHugePages smaps_rollup)" -eq 0 ]
	wait_job reload "$TMP/img"
	cat "$TMP/job.json"
	run json_get "$TMP/job.json" 'd["result"]["huge_bytes"] >= '"$huge0"' * 1024'
	assert_output True
	huge2=$(proc_kb "$PID" AnonHugePages smaps_rollup)
	echo "AnonHugePages before $huge0 kB, after reload $huge2 kB"
	[ "$huge2" -ge $((huge0 * 9 / 10)) ]
	say sum '^sum '
	[ "$LAST" = "$before" ]
	say check '^ok$'
	stop_fed
}

@test "reload: evict works without any reload; the process may exit" {
	start --mib 16
	evict "$TMP/img"
	say check '^ok$'
	say sum '^sum '
	stop_fed
	run ctl --json status
	[ "$(wc -l <"$TMP/out")" -eq 3 ]
}

@test "reload: read(2) and write(2) on evicted pages" {
	start --mib 16
	evict "$TMP/img"
	# Seen once to hang for 120 s in a full-suite run, not reproduced
	# alone: show where the program's threads wait if it happens again.
	say "write $TMP/W" '^write ok$' || { where_waits; false; }
	say read '^read ok$' || { where_waits; false; }
	say check '^ok$'
	stop_fed
}

@test "reload: many threads fault at once" {
	start --mib 64
	evict "$TMP/img"
	say "threads 16" '^threads ok$'
	run ctl --json status
	assert_success
	run json_get - '"%s %s" % (d["evicted"][0]["faults"] >= 16, d["evicted"][0]["fault_p99_ns"] > 0)' <<<"$output"
	assert_output "True True"
	stop_fed
}

@test "reload: fork while evicted and during reload: the child sees the memory" {
	start --mib 32
	evict "$TMP/img"
	say fork '^fork ok$'
	ctl --json reload "$TMP/img" --rate 16 >"$TMP/reload.json"
	say fork '^fork ok$'
	say check '^ok$'
	run ctl --json job "$(job_of "$TMP/reload.json")" --wait
	assert_success
	stop_fed
}

@test "reload: munmap, mremap and madvise(DONTNEED) during reload" {
	start --mib 32
	evict "$TMP/img"
	ctl --json reload "$TMP/img" --rate 16 >"$TMP/reload.json"
	say munmap '^munmap ok$'
	say mremap '^mremap ok$'
	say dontneed '^dontneed ok$'
	say protect '^protect ok$'
	say check '^ok$'
	run ctl --json job "$(job_of "$TMP/reload.json")" --wait
	assert_success
	say check '^ok$'
	stop_fed
}

# Each extent is installed where the loader picked it: searching the
# chunk map for every extent made a reload of 16,384 one-page extents
# take 8 CPU-seconds (bench/criu.sh, 2026-12-06).
@test "reload: a sparse image (4,096 one-page extents) is installed without a search per extent, and comes back equal" {
	start_fed "$WL/ckpt_pattern" --dense 4 --sparse 256 --threads 1
	say check '^ok$'
	evict "$TMP/img"
	[ "$(json_get "$TMP/evict.json" 'd["result"]["extents"]')" -ge 4096 ]
	wait_job reload "$TMP/img"
	run json_get "$TMP/job.json" 'd["result"]["pages_loaded"] == d["result"]["pages_total"] >= 4096'
	assert_output True
	[ "$(json_get "$TMP/job.json" 'd["result"]["chunk_searches"]')" = 0 ]
	say check '^ok$'
	stop_fed
}

# The other path: madvise(DONTNEED) of half an evicted extent splits its
# chunk, and the loader finds the other half by searching.
@test "reload: an extent split while evicted is found and installed whole" {
	start --mib 32
	evict "$TMP/img"
	say dontneed '^dontneed ok$'
	wait_job reload "$TMP/img"
	[ "$(json_get "$TMP/job.json" 'd["result"]["chunk_searches"]')" -gt 0 ]
	say check '^ok$'
	say sum '^sum '
	stop_fed
}

@test "reload: mremap again and again while the loader runs: every page lands where it belongs" {
	start --mib 64
	say sum '^sum '
	before=$LAST
	evict "$TMP/img"
	ctl --json reload "$TMP/img" --rate 24 >"$TMP/reload.json"
	# Each move reorders the loader's map and holds its copies back
	# (EAGAIN until the event is read): what it loads next must be the
	# extent it read, at the place that extent is now.
	for i in $(seq 40); do
		say mremap '^mremap ok$'
	done
	run ctl --json job "$(job_of "$TMP/reload.json")" --wait
	assert_success
	say check '^ok$'
	say sum '^sum '
	[ "$LAST" = "$before" ]
	stop_fed
}

@test "reload: exit during reload drops the pending work; the supervisor runs on" {
	# A shell keeps the supervisor running after the workload exits.
	WRAP=1 start --mib 64
	evict "$TMP/img"
	job=$(ctl --json reload "$TMP/img" --rate 8 | job_of -)
	say exit '^bye$'
	wait_job job "$job"
	run json_get "$TMP/job.json" 'd["result"]["gone"]'
	assert_output 1
	run ctl --json status
	assert_output --partial '"evicted":[]'
}

@test "reload: exec while evicted: its arguments are read from evicted memory; the pending work is dropped" {
	MV_ARGS=(--notify-all)
	WRAP=1 start --mib 16
	evict "$TMP/img"
	say exec '^exec ok$' || { where_waits; false; }
	# memvisor runs on (seen once to have exited here, cause not found:
	# show its log when it happens again).
	kill -0 "$MVPID" || { cat "$TMP/err"; false; }
	# The shell around it was evicted too and stays so; the exec'ed
	# process's space is gone.
	wait_for 10 ctl_lacks "\"pid\":$PID," --json status
	run ctl --json reload "$TMP/img" --wait
	assert_success
	assert_output --partial '"gone":0'
}

@test "reload: the injected calls pass a policy that kills the program's madvise" {
	echo '{"version":1,"rules":[{"name":"no-madvise","syscalls":["madvise"],"action":"kill"}]}' >"$TMP/policy.json"
	MV_ARGS=(--policy "$TMP/policy.json")
	start --mib 8
	evict "$TMP/img"
	run json_get "$TMP/evict.json" 'd["result"]["evicted"]["regions"] > 0'
	assert_output True
	say check '^ok$'
	run ctl --json stats "$PID"
	refute_output --partial '"kill":1'
	stop_fed
}

@test "reload: a corrupt page is never loaded; corrupt page checksums or manifest are refused" {
	start --mib 16
	evict "$TMP/img"
	# Flip a byte of the largest extent's first page (evicted: not a page
	# the evict keeps resident, as the arguments at the stack's top).
	sums=$(json_get "$TMP/img/manifest.json" 'd["page_sums_offset"]')
	at=$(json_get "$TMP/img/manifest.json" 'max((e for p in d["processes"] for r in p["regions"] if r["content"] == "private" for e in r["extents"]), key=lambda e: e[1])[2]')
	flip_byte "$TMP/img/pages" $((at + 100)) 0xff
	job=$(ctl --json reload "$TMP/img" | job_of -)
	run ctl --json job "$job" --wait
	assert_failure
	assert_output --partial corrupt_image
	assert_output --partial "checksum mismatch"
	# The process runs on (touching that page would kill it: it cannot
	# be given its memory).
	kill -0 "$PID"
	# Damaged page checksums or manifest: the job fails before it loads
	# anything (the control handler reads the pages header only).
	flip_byte "$TMP/img/pages" $((at + 100)) 0xff
	flip_byte "$TMP/img/pages" $((sums + 2))
	run ctl --json reload "$TMP/img" --wait
	assert_failure
	assert_output --partial '"code":"corrupt_image"'
	assert_output --partial "page checksums are corrupt"
	flip_byte "$TMP/img/pages" $((sums + 2))
	flip_byte "$TMP/img/manifest.json" $(($(stat -c %s "$TMP/img/manifest.json") / 2))
	run ctl --json reload "$TMP/img" --wait
	assert_failure
	assert_output --partial '"code":"corrupt_image"'
	kill -9 "$PID"
	stop_fed || true
}

@test "reload: one corrupt page costs that page only: its neighbours in the extent come back, the page itself is SIGBUS" {
	# Each extent (up to 2 MiB) had one checksum: a fault read and
	# checked the whole extent, and one bad byte made all its 512 pages
	# unservable. Each page has its own checksum now.
	start --mib 16
	evict "$TMP/img"
	# Page 5 of the extent at region A's page 700 (anonymous regions
	# next to each other are one vma: A is found by its address).
	say "where A" '^at '
	a=$((0x${LAST#at }))
	read -r page off < <(json_get "$TMP/img/manifest.json" "
[(str((x[0] + 5 * 4096 - $a) // 4096) + ' ' + str(x[2] + 5 * 4096))
 for p in d['processes'] for r in p['regions'] for x in r['extents']
 if x[0] <= $a + 700 * 4096 < x[0] + x[1] * 4096][0]")
	echo "page $page of A at pages offset $off"
	flip_byte "$TMP/img/pages" $((off + 77))
	say "page A $((page - 1))" '^page ok$'
	say "page A $((page + 1))" '^page ok$'
	say "page A $((page + 7))" '^page ok$'
	echo "page A $page" >&7
	rc=0
	wait $MVPID || rc=$?
	run grep -c "^page bad" "$TMP/out"
	assert_output 0
	# SIGBUS (7) where the kernel has UFFDIO_POISON, else SIGKILL (9).
	[ $rc = 135 ] || [ $rc = 137 ]
}

@test "reload: an image other than the evicted one is refused" {
	start --mib 8
	ctl checkpoint "$TMP/other" --wait
	evict "$TMP/img"
	run ctl --json reload "$TMP/other"
	assert_failure
	assert_output --partial '"code":"image_mismatch"'
	run ctl reload "$TMP/nothing-here"
	assert_failure
	# And a checkpoint now would miss the evicted pages: refused.
	run ctl checkpoint "$TMP/third"
	assert_failure
	assert_output --partial "reload it first"
	say check '^ok$'
	stop_fed
}

@test "reload: --rate is honoured within 10%" {
	start --mib 96
	evict "$TMP/img"
	wait_job reload "$TMP/img" --rate 40
	run json_get "$TMP/job.json" 'round(d["result"]["read_rate"] / 40e6, 3)'
	echo "read rate / asked: $output"
	python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 0.9 <= r <= 1.1 else 1)" "$output"
	say check '^ok$'
	stop_fed
}

@test "reload: without userfaultfd access evict is refused and the program keeps its memory" {
	[ "$(id -u)" = 0 ] || skip "needs root to run the program as nobody"
	[ "$(cat /proc/sys/vm/unprivileged_userfaultfd)" = 0 ] || skip "vm.unprivileged_userfaultfd=1: userfaultfd is open to all"
	skip_unless_cmd setpriv
	start_fed setpriv --reuid=nobody --regid=nogroup --clear-groups "$WL/reload_wl" --mib 16
	rss0=$(proc_kb "$PID" RssAnon)
	run ctl checkpoint "$TMP/img" --evict --wait
	assert_failure
	assert_output --partial "userfaultfd"
	assert_output --partial "keeps its memory"
	[ "$(proc_kb "$PID" RssAnon)" -ge $((rss0 * 9 / 10)) ]
	say check '^ok$'
	stop_fed
}

@test "reload: a loader copy that finds its range unmapped (ENOENT) goes on" {
	export MEMVISOR_FAULT=reload_copy_gone:1
	start --mib 8
	unset MEMVISOR_FAULT
	say sum '^sum '
	before=$LAST
	evict "$TMP/img"
	wait_job reload "$TMP/img"
	run json_get "$TMP/job.json" 'd["state"] == "done" and d["result"]["pages_loaded"] == d["result"]["pages_total"]'
	assert_output True
	say sum '^sum '
	[ "$LAST" = "$before" ]
	stop_fed
}

@test "reload: a loader that installs nothing gives up with an error instead of reading the image for good; the memory is served on fault" {
	# A bug in the loader's copy steps (fixed in 09a0f1a before it
	# landed) installed 16 pages of every 128 and no more: the readers
	# picked the same extents again and again and read 4.8 TB in 12
	# minutes, the job never ended. reload_install_none does the same
	# from its hit on; the loader's no-progress guard ends the job.
	export MEMVISOR_FAULT=reload_install_none:1
	start --mib 8
	unset MEMVISOR_FAULT
	say sum '^sum '
	before=$LAST
	evict "$TMP/img"
	run ctl_within 60 --json reload "$TMP/img" --wait
	assert_failure
	assert_output --partial "the loader installed nothing in 1000 rounds"
	say sum '^sum '
	[ "$LAST" = "$before" ]
	stop_fed
}

@test "reload: a failed injection or registration leaves the program correct" {
	for f in remote_syscall:1 uffd_api:1 uffd_register:1 remote_syscall:3; do
		MV_ARGS=()
		export MEMVISOR_FAULT=$f
		start --mib 8
		unset MEMVISOR_FAULT
		run ctl checkpoint "$TMP/img-${f%%:*}${f##*:}" --evict --wait
		echo "$f: $output"
		say check '^ok$'
		say "threads 4" '^threads ok$'
		stop_fed
	done
}

# The scheduling class (ps cls: FF = SCHED_FIFO, TS = SCHED_OTHER) of each
# fault worker of memvisor ($MVPID), one per line.
fault_worker_classes() {
	ps -L -o comm=,cls= -p "$MVPID" | awk '$1 == "mv-fault" {print $2}'
}

# Evict, fault every page in (each fault then reads ahead), and check that
# every fault worker left is in class CLASS; reload and compare the sum.
t_fault_class() { # CLASS
	start --mib 32
	say sum '^sum '
	before=$LAST
	evict "$TMP/img"
	say check '^ok$'
	run fault_worker_classes
	echo "fault workers: $(echo $output)"
	[ "$(echo "$output" | grep -c .)" -ge 4 ]
	[ -z "$(echo "$output" | grep -v -x "$1")" ]
	wait_job reload "$TMP/img"
	say sum '^sum '
	[ "$LAST" = "$before" ]
	stop_fed
}

@test "reload: fault workers serve faults under SCHED_FIFO where memvisor may, and stay so after their read-ahead" {
	require_root "SCHED_FIFO needs CAP_SYS_NICE"
	t_fault_class FF
}

@test "reload: MEMVISOR_FAULT_RT=0 leaves the fault workers in the normal class" {
	MEMVISOR_FAULT_RT=0 t_fault_class TS
}
