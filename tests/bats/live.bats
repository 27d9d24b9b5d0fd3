#!/usr/bin/env bats
# checkpoint --live (issue 14): the program runs while its private memory
# is copied; the image must still hold one instant (the pause), checked
# on tests/workloads/live_counter, whose writer threads sweep their pages
# for ever (tests/helpers/livecheck.py).

load helpers
bats_require_minimum_version 1.5.0

setup() {
	setup_tmp
	skip_unless_uffd
	"$MEMVISOR" check --json | json_get - '"wp" in d["userfaultfd_features"]' | grep -q True ||
		skip "this kernel's userfaultfd has no write-protect faults (Linux 5.7)"
}

teardown() {
	teardown_tmp
}

# start_counter ARGS...: live_counter under memvisor; ADDR and THREADS
# from its "ready PID ADDR THREADS".
start_counter() {
	start_fed "$WL/live_counter" "$@"
	ADDR=$(awk '/^ready/{print $3}' "$TMP/out")
	THREADS=$(awk '/^ready/{print $4}' "$TMP/out")
}

# live_ckpt DIR: checkpoint --live, the job's end in $TMP/job.json.
live_ckpt() {
	run ctl --json checkpoint "$1" --live --wait
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
}

live_field() { json_get "$TMP/job.json" "d['result']['live'].get('$1')"; }

sweeps() {
	say sweeps '^sweeps '
	echo "${LAST#sweeps }"
}

# LIVE_TRIES: 2 in make check, 20 in make soak.
@test "checkpoint --live: the writers never stop, and each image holds one instant (LIVE_TRIES tries)" {
	start_counter --mib 64 --threads 2
	for try in $(seq "${LIVE_TRIES:-2}"); do
		before=$(sweeps)
		live_ckpt "$TMP/img$try"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "try $try: $output"
		[ "$(live_field live)" = True ]
		# Only what cannot be write-protected (here: the stacks of no
		# thread, the libraries' written pages) is copied in the pause.
		[ "$(live_field paused_bytes)" -lt "$(live_field live_bytes)" ]
		python3 "$HELPERS/livecheck.py" "$TMP/img$try" "$PID" "$ADDR" 64 "$THREADS"
		run "$MEMVISOR" image verify "$TMP/img$try"
		assert_success
		[ "$(sweeps)" -gt "$before" ]
		rm -rf "$TMP/img$try"
	done
	stop_fed
}

# live_copy_stall: the copier starts 2 s after the resume, so the writers
# reach every extent before it. The handler copies each extent a write
# faults in whole (fault_copied_bytes) and the copier skips it; with
# live_no_buffer the first fault finds no staging buffer and keeps its
# window instead, which a later fault's copy of the extent takes in.
@test "checkpoint --live: writes ahead of the copier copy their extents, or keep their pages without a buffer; each image holds one instant" {
	for fault in live_copy_stall live_copy_stall,live_no_buffer; do
		MEMVISOR_FAULT=$fault start_counter --mib 32 --threads 2
		live_ckpt "$TMP/img"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "$fault: $output"
		[ "$(live_field live)" = True ]
		[ "$(live_field fault_copied_bytes)" -gt $((16 << 20)) ]
		if [ "$fault" != live_copy_stall ]; then
			[ "$(live_field kept_pages)" -gt 0 ]
		fi
		python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 32 "$THREADS"
		run "$MEMVISOR" image verify "$TMP/img"
		assert_success
		# And once more, the copier and the faults racing.
		rm -rf "$TMP/img"
		live_ckpt "$TMP/img"
		python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 32 "$THREADS"
		run "$MEMVISOR" image verify "$TMP/img"
		assert_success
		rm -rf "$TMP/img"
		stop_fed
	done
}

@test "checkpoint --live: memory unmapped or dropped while it is copied: it starts again stopping the program, and the image still holds one instant" {
	# Pages removed before the copier reached them are lost for the
	# image: the live attempt is given up for a stop-the-world one. The
	# copy starts 2 s after the resume (live_copy_stall, the job's phase
	# "stalled"); the program drops its spare region then, on request,
	# so no race decides it. (No churner here: its own drops would be
	# seen first, with their own reason; test 60 has it.)
	# The fault point stalls a supervisor's first live copy: one program
	# each.
	local try=0
	for drop in dontneed unmap; do
		try=$((try + 1))
		MEMVISOR_FAULT=live_copy_stall start_counter --mib 64 --threads 2 --spare-mib 8
		ctl --json checkpoint "$TMP/img$try" --live --wait >"$TMP/job.out" 2>&1 &
		local job=$!
		wait_for 60 sh -c "'$MEMVISOR' ctl --socket '$SOCK' --json jobs | grep -q '\"phase\":\"stalled\"'" ||
			{ ctl --json jobs; false; }
		case $drop in
		dontneed) say dontneed '^dropped$' ;;
		unmap) say unmap '^unmapped$' ;;
		esac
		wait $job || { cat "$TMP/job.out"; false; }
		tail -1 "$TMP/job.out" >"$TMP/job.json"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "$drop: $output"
		[ "$(live_field live)" = False ]
		case $drop in
		dontneed) live_field fallback | grep -q "dropped (madvise)" ;;
		unmap) live_field fallback | grep -q "unmapped" ;;
		esac
		python3 "$HELPERS/livecheck.py" "$TMP/img$try" "$PID" "$ADDR" 64 "$THREADS"
		run "$MEMVISOR" image verify "$TMP/img$try"
		assert_success
		rm -rf "$TMP/img$try"
		grep -q "fault injected at live_copy_stall" "$TMP/err"
		[ "$(sweeps)" -gt 0 ]
		stop_fed
	done
}

@test "checkpoint --live: a region that cannot be write-protected is copied during the pause, and says why" {
	export MEMVISOR_FAULT=uffd_writeprotect:1
	start_counter --mib 16 --threads 1
	unset MEMVISOR_FAULT
	live_ckpt "$TMP/img"
	run json_get "$TMP/job.json" 'd["result"]["live"]["paused"]'
	echo "$output"
	assert_output --partial "cannot write-protect"
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 16 "$THREADS"
	stop_fed
}

@test "checkpoint --live without userfaultfd for the program: everything is copied during the pause, and the result says why" {
	[ "$(id -u)" = 0 ] || skip "needs root to run the program as nobody"
	[ "$(cat /proc/sys/vm/unprivileged_userfaultfd)" = 0 ] || skip "vm.unprivileged_userfaultfd=1: userfaultfd is open to all"
	skip_unless_cmd setpriv
	start_fed setpriv --reuid=nobody --regid=nogroup --clear-groups "$WL/live_counter" --mib 16 --threads 1
	ADDR=$(awk '/^ready/{print $3}' "$TMP/out")
	live_ckpt "$TMP/img"
	run json_get "$TMP/job.json" 'd["result"]["live"]'
	echo "$output"
	assert_output --partial "userfaultfd"
	[ "$(live_field live_bytes)" = 0 ]
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 16 1
	stop_fed
}

# The arming (live.c): a tree of 32 MiB or more is write-protected while
# it runs, before the stop, and the pause protects again only what was
# written since. live_arm_stall holds the job 1 s between the two, while
# the writers sweep every page many times (and, with churn, memory is
# mapped, filled and unmapped): every page written then must be
# protected again in the pause, or the copy reads pages newer than the
# pause and livecheck finds two instants.
@test "checkpoint --live of a big tree: what the program writes between the arming and the pause is protected again, and the image holds one instant" {
	export MEMVISOR_FAULT=live_arm_stall
	start_counter --mib 64 --threads 2
	unset MEMVISOR_FAULT
	before=$(sweeps)
	live_ckpt "$TMP/img"
	run json_get "$TMP/job.json" 'd["result"]["live"]'
	echo "$output"
	[ "$(live_field live)" = True ]
	armed() { json_get "$TMP/job.json" "d['result']['live']['armed']['$1']"; }
	[ "$(armed bytes)" -ge $((64 << 20)) ]
	[ "$(armed write_faults)" -gt 0 ]
	[ "$(armed reprotected_bytes)" -gt 0 ]
	[ "$(armed stop_ns)" -gt 0 ]
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 64 "$THREADS"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
	[ "$(sweeps)" -gt "$before" ]
	stop_fed
	# With memory mapped and unmapped meanwhile: the live copy may start
	# again stopped (pages removed while it copies), the image is one
	# instant either way.
	rm -rf "$TMP/img"
	export MEMVISOR_FAULT=live_arm_stall
	start_counter --mib 64 --threads 2 --churn-mib 16
	unset MEMVISOR_FAULT
	live_ckpt "$TMP/img"
	run json_get "$TMP/job.json" 'd["result"]["live"]'
	echo "$output"
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 64 "$THREADS"
	stop_fed
}

# A tree below 32 MiB is not armed, nor a big one with live_arm_off (as a
# kernel where the arming fails): the pause protects it whole.
@test "checkpoint --live of a small tree, or one not armed: one stop, the pause protects all" {
	start_counter --mib 16 --threads 1
	live_ckpt "$TMP/img"
	[ "$(live_field live)" = True ]
	[ "$(live_field armed)" = None ]
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 16 "$THREADS"
	stop_fed
	rm -rf "$TMP/img"
	export MEMVISOR_FAULT=live_arm_off
	start_counter --mib 64 --threads 2
	unset MEMVISOR_FAULT
	live_ckpt "$TMP/img"
	[ "$(live_field live)" = True ]
	[ "$(live_field armed)" = None ]
	grep -q "fault injected at live_arm_off" "$TMP/err"
	python3 "$HELPERS/livecheck.py" "$TMP/img" "$PID" "$ADDR" 64 "$THREADS"
	stop_fed
}

rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }

# live_evict DIR: checkpoint --live --evict, the job's end in $TMP/job.json.
live_evict() {
	run ctl --json checkpoint "$1" --live --evict --wait
	assert_success
	echo "$output" | tail -1 >"$TMP/job.json"
}

evict_field() { json_get "$TMP/job.json" "d['result']['live']['evict']['$1']"; }

# verify_reload DIR: the writers' cold region is right while evicted and
# after a reload of DIR, which then goes.
verify_reload() {
	say verify '^verify ok'
	ctl reload "$1" --wait
	say verify '^verify ok'
	rm -rf "$1"
}

@test "checkpoint --live --evict: what was written since the pause stays, the rest is dropped, and no byte is lost (LIVE_TRIES cycles)" {
	# --check: every writer finds its previous sweep's number in each
	# page before it writes the next (a page dropped after it was
	# written comes back older, or as zeros: exit 3); the cold region,
	# never written after the start, is verified on demand.
	start_counter --mib 16 --threads 2 --check --cold-mib 48
	for try in $(seq "${LIVE_TRIES:-2}"); do
		before=$(rss_kib "$PID")
		live_evict "$TMP/img$try"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "try $try: $output"
		[ "$(live_field live)" = True ]
		# The cold region is dropped; the writers' pages mostly stay.
		evicted=$(json_get "$TMP/job.json" 'd["result"]["evicted"]["bytes"]')
		[ "$evicted" -ge $((48 << 20)) ]
		[ "$(evict_field written_bytes)" -gt 0 ]
		[ "$(evict_field pause_ns)" -gt 0 ]
		# The result's times are the first pause's (the second stop
		# once made layout_ns negative).
		run json_get "$TMP/job.json" 'd["result"]["layout_ns"] >= 0 and d["result"]["stop_ns"] <= d["result"]["pause_ns"]'
		assert_output True
		[ "$(rss_kib "$PID")" -lt $((before - 40 * 1024)) ]
		# The image is still one instant: the first pause.
		python3 "$HELPERS/livecheck.py" "$TMP/img$try" "$PID" "$ADDR" 16 "$THREADS"
		verify_reload "$TMP/img$try"
	done
	before=$(sweeps)
	sleep 0.2
	[ "$(sweeps)" -gt "$before" ]
	echo exit >&7
	stop_fed
}

@test "checkpoint --live --evict with writes ahead of the copier: extents copied on a write fault stay protected until the evict, and no byte is lost" {
	MEMVISOR_FAULT=live_copy_stall start_counter --mib 16 --threads 2 --check --cold-mib 16
	for try in 1 2; do
		live_evict "$TMP/img$try"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "try $try: $output"
		[ "$(live_field live)" = True ]
		if [ $try = 1 ]; then
			[ "$(live_field fault_copied_bytes)" -gt $((8 << 20)) ]
		fi
		evicted=$(json_get "$TMP/job.json" 'd["result"]["evicted"]["bytes"]')
		[ "$evicted" -ge $((16 << 20)) ]
		python3 "$HELPERS/livecheck.py" "$TMP/img$try" "$PID" "$ADDR" 16 "$THREADS"
		verify_reload "$TMP/img$try"
	done
	echo exit >&7
	stop_fed
}

@test "checkpoint --live --evict while memory is unmapped and dropped: no byte is lost, whether the live copy goes through or starts again stopped" {
	start_counter --mib 16 --threads 2 --check --cold-mib 16 --churn-mib 16
	for try in $(seq 8); do
		live_evict "$TMP/img$try"
		run json_get "$TMP/job.json" 'd["result"]["live"]'
		echo "try $try: $output"
		verify_reload "$TMP/img$try"
	done
	echo exit >&7
	stop_fed
}

@test "livecheck.py can fail" {
	run python3 "$HELPERS/livecheck.py" --selftest
	assert_success
}
