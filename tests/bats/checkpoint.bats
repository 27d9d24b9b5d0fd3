#!/usr/bin/env bats
# Checkpoints (issue 5): the image equals the processes' memory, threads
# and processes that come and go, errors, integrity, permissions, and a
# program that does not notice.

load helpers
bats_require_minimum_version 1.5.0

teardown() {
	if mountpoint -q "$TMP/small" 2>/dev/null; then umount "$TMP/small" || true; fi
	teardown_tmp
}

imgcmp() { python3 "$HELPERS/imgcmp.py" "$@"; }

# Every thread of PID is free of ptrace and not stopped.
not_traced() {
	local t
	for t in /proc/"$1"/task/*; do
		st=$(cat "$t/status" 2>/dev/null) || continue # a thread that just ended
		grep -q '^TracerPid:[[:space:]]*0$' <<<"$st" || return 1
		! grep -q '^State:[[:space:]]*[tT]' <<<"$st" || return 1
	done
}

region() { awk -v n="$1" '$1 == "region" && $2 == n {print $3, $4}' "$TMP/out"; }

mf() { json_get "$1/manifest.json" "$2"; }

# ckpt_pattern (ARGS...) under memvisor, checkpointed into $TMP/img.
start_checkpointed() { # CKPT_PATTERN-ARGS...
	start_fed "$WL/ckpt_pattern" "$@"
	ctl checkpoint "$TMP/img" --wait >/dev/null
}

@test "the image equals the process's memory byte for byte; clean pages are absent; size is close to committed" {
	start_fed "$WL/ckpt_pattern" --dense 32 --sparse 1024 --threads 4
	mkdir "$TMP/dump"
	say_until "dump $TMP/dump" '^dumped'
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	assert_output --partial "image $TMP/img"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
	# Region by region, against the dump the process wrote itself; the
	# page counts are exactly what it wrote: one page in 16 of the sparse
	# gigabyte, the memfd without its hole, the two written pages of the
	# private file mapping (its clean pages are the file's), and the
	# PROT_NONE pages (read through /proc/PID/mem).
	for spec in dense:8192 sparse:16384 shared:8 memfd:12 cow:2 prot_none:4 tbuf0:64 tbuf3:64; do
		name=${spec%:*}
		read -r s e < <(region "$name")
		imgcmp region "$TMP/img" "$PID" "$s" "$e" "$TMP/dump/$name.bin" --pages "${spec#*:}"
	done
	# Every thread, with its registers.
	[ "$(mf "$TMP/img" "len([p for p in d['processes'] if p['pid']==$PID][0]['threads'])")" -eq 5 ]
	[ "$(mf "$TMP/img" "all(len(t['regsets']['prstatus']['data'])>200 and 'xstate' in t['regsets'] for p in d['processes'] for t in p['threads'])")" = True ]
	# Shared memory went through its file.
	[ "$(mf "$TMP/img" "sorted(o['source']+'/'+o['coverage'] for o in d['objects'])")" = '["map_files/whole", "map_files/whole"]' ]
	# vdso and vvar are skipped.
	[ "$(mf "$TMP/img" "sorted(set(r['kind'] for p in d['processes'] for r in p['regions'] if r['content']=='skipped'))")" = '["vdso", "vvar"]' ] ||
		[ "$(mf "$TMP/img" "sorted(set(r['kind'] for p in d['processes'] for r in p['regions'] if r['content']=='skipped'))")" = '["vdso", "vsyscall", "vvar"]' ]
	# Close to committed: anonymous memory (smaps_rollup) plus the data
	# pages of the two shared objects (8 + 12 pages).
	anon=$(($(proc_kb "$PID" Anonymous smaps_rollup) * 1024))
	bytes=$(mf "$TMP/img" "d['totals']['data_bytes']")
	python3 -c "import sys; b, a = $bytes, $anon + 20 * 4096; sys.exit(0 if abs(b - a) <= 0.01 * a else 1)" ||
		{ echo "image $bytes bytes, committed $anon + 80 KiB"; false; }
	# Files 0600, the directory 0700, nothing else in it.
	[ "$(stat -c %a "$TMP/img")" = 700 ]
	[ "$(stat -c %a "$TMP/img/pages")" = 600 ]
	[ "$(stat -c %a "$TMP/img/manifest.json")" = 600 ]
	[ "$(ls -A "$TMP/img" | tr '\n' ' ')" = "manifest.json pages " ]
	no_temp_image
	# The program runs on, unharmed and untraced.
	not_traced "$PID"
	say_until check '^ok'
	stop_fed
}

@test "image info summarises an image" {
	start_checkpointed --dense 8 --sparse 64 --threads 2
	run "$MEMVISOR" image info "$TMP/img"
	assert_success
	assert_output --partial "1 process (0 gone), 3 threads"
	assert_output --regexp "by kind: +anon"
	assert_line --regexp "^ +$PID +[0-9]+ +3 "
	assert_output --partial "map_files whole  /memfd:ckpt_pattern"
	run "$MEMVISOR" image info --json "$TMP/img"
	assert_success
	echo "$output" >"$TMP/info.json"
	[ "$(json_get "$TMP/info.json" "d['threads']")" -eq 3 ]
	[ "$(json_get "$TMP/info.json" "d['by_kind']['anon'] >= (8 + 4) << 20")" = True ]
	stop_fed
}

@test "verify catches one flipped byte and names the extent; a changed manifest too" {
	start_checkpointed --dense 8 --sparse 64 --threads 1
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
	# One byte in the middle of the dense region, in whichever region
	# and extent of the image hold it: the kernel may have merged the
	# mapping with a neighbour, and the region then starts elsewhere.
	read -r s e < <(region dense)
	local at=$((0x$s + (4 << 20) + 1234)) rs re k off
	read -r rs re k off < <(mf "$TMP/img" "next('%s %s %d %d' % (r['start'], r['end'], i, x[2] + $at - x[0]) for p in d['processes'] for r in p['regions'] for i, x in enumerate(r['extents']) if x[0] <= $at < x[0] + x[1] * 4096)")
	flip_byte "$TMP/img/pages" "$off"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_failure 1
	assert_output --partial "region $rs-$re extent $k"
	assert_output --partial "checksum mismatch"
	run "$MEMVISOR" image verify --json "$TMP/img"
	assert_failure 1
	flip_byte "$TMP/img/pages" "$off"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
	# A manifest edited to agree with itself is still caught: its
	# checksum is in the pages header.
	cp "$TMP/img/manifest.json" "$TMP/manifest.orig"
	sed -i 's/"pause_ns":\([0-9]\)/"pause_ns":9\1/' "$TMP/img/manifest.json"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_failure 1
	assert_output --partial "manifest.json"
	cp "$TMP/manifest.orig" "$TMP/img/manifest.json"
	# A truncated pages file.
	truncate -s -4096 "$TMP/img/pages"
	run "$MEMVISOR" image verify "$TMP/img"
	assert_failure 1
	assert_output --partial "pages is"
	stop_fed
}

@test "an existing directory is refused unless --force, which replaces only an image" {
	start_checkpointed --dense 4 --sparse 16 --threads 0
	id1=$(mf "$TMP/img" "d['id']")
	run ctl checkpoint "$TMP/img"
	assert_failure 1
	assert_output --partial "exists (use --force to replace it)"
	run ctl checkpoint "$TMP/img" --force --wait
	assert_success
	[ "$(mf "$TMP/img" "d['id']")" != "$id1" ]
	"$MEMVISOR" image verify "$TMP/img"
	mkdir "$TMP/other"
	touch "$TMP/other/precious"
	run ctl checkpoint "$TMP/other" --force
	assert_failure 1
	assert_output --partial "not a memvisor image; not replacing it"
	[ -e "$TMP/other/precious" ]
	mkdir "$TMP/empty"
	run ctl checkpoint "$TMP/empty" --force --wait
	assert_success
	"$MEMVISOR" image verify "$TMP/empty"
	no_temp_image
	stop_fed
}

@test "bad requests: a relative path, a pid not supervised, a missing parent, a file in the way" {
	start_fed "$WL/ckpt_pattern" --dense 4 --sparse 16 --threads 0
	req() { raw send "{\"id\":1,\"cmd\":\"checkpoint\",\"args\":$1}"; }
	run req '{"dir":"relative/img"}'
	assert_output --partial '"code":"bad_request"'
	run req "{\"dir\":\"$TMP/x\",\"pids\":[1]}"
	assert_output --partial '"code":"no_such_process"'
	run req "{\"dir\":\"$TMP/x\",\"pids\":[]}"
	assert_output --partial '"code":"bad_request"'
	run req "{\"dir\":\"$TMP/x\",\"pids\":[\"$PID\"]}"
	assert_output --partial '"code":"bad_request"'
	run req "{\"dir\":\"$TMP/x\",\"buffer\":1}"
	assert_output --partial '"code":"bad_request"'
	run ctl --json checkpoint "$TMP/no/such/dir/img"
	assert_failure 1
	assert_output --partial '"code":"invalid"'
	assert_output --partial "No such file or directory"
	touch "$TMP/file"
	run ctl checkpoint "$TMP/file/img"
	assert_failure 1
	assert_output --partial "Not a directory"
	[ ! -e "$TMP/x" ]
	# The connection and the supervisor are fine.
	run ctl checkpoint "$TMP/x" --pid "$PID" --wait
	assert_success
	stop_fed
}

@test "a second checkpoint while one runs is busy; the job shows on status and on the event stream" {
	# The first job is held 2 s after its pause (live_copy_stall): it is
	# running when the second is asked for, however fast the disk.
	MEMVISOR_FAULT=live_copy_stall start_fed "$WL/ckpt_churn" big 512
	ctl --json events >"$TMP/events" 7>&- &
	remember_pid $!
	sleep 0.2
	run ctl --json checkpoint "$TMP/img1" --buffer 16M --live
	assert_success
	job=$(json_get - 'd["job"]' <<<"$output")
	run ctl checkpoint "$TMP/img2"
	assert_failure 1
	assert_output --partial "memvisor ctl: a checkpoint is already running"
	ctl --json status >"$TMP/status.json"
	[ "$(json_get "$TMP/status.json" "[j['kind'] for j in d['jobs']]")" = '["checkpoint"]' ]
	run ctl job "$job" --wait
	assert_success
	assert_output --partial "checkpoint done"
	assert_output --partial "paused"
	wait_for 5 grep -q '"state":"done"' "$TMP/events"
	grep '"event":"job"' "$TMP/events" | grep -q '"kind":"checkpoint"'
	grep '"event":"job"' "$TMP/events" | grep -q '"phase":"copying"'
	[ ! -e "$TMP/img2" ]
	"$MEMVISOR" image verify "$TMP/img1"
	stop_fed
}

@test "threads created during the checkpoint are stopped too" {
	start_fed "$WL/ckpt_churn" threads
	for i in 1 2 3 4 5; do
		run ctl checkpoint "$TMP/img$i" --wait
		assert_success
		"$MEMVISOR" image verify "$TMP/img$i" >/dev/null
		not_traced "$PID"
	done
	# The thread count moved between images, and each thread has registers.
	counts=$(for i in 1 2 3 4 5; do mf "$TMP/img$i" "d['totals']['threads']"; done | sort -u | wc -l)
	[ "$counts" -ge 2 ]
	for i in 1 2 3 4 5; do
		[ "$(mf "$TMP/img$i" "all('prstatus' in t['regsets'] for p in d['processes'] for t in p['threads'])")" = True ]
	done
	say_until count '^created'
	[ "$(awk '/^created/{n=$2} END {print n}' "$TMP/out")" -gt 100 ]
	stop_fed
}

@test "a forked tree: every process is in the image, each child byte for byte; --pid chooses" {
	mkdir "$TMP/dump"
	start_fed "$WL/ckpt_churn" fork 3 "$TMP/dump"
	wait_for 10 sh -c "[ \$(grep -c '^child' '$TMP/out') -eq 3 ]"
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	[ "$(mf "$TMP/img" "d['totals']['processes']")" -eq 4 ]
	while read -r _ idx cpid s e; do
		imgcmp region "$TMP/img" "$cpid" "$s" "$e" "$TMP/dump/child-$idx.bin" --pages 1024
		[ "$(mf "$TMP/img" "[p['ppid'] for p in d['processes'] if p['pid']==$cpid][0]")" -eq "$PID" ]
	done < <(grep '^child' "$TMP/out")
	# The processes were stopped together: one pause covers them all.
	[ "$(mf "$TMP/img" "d['pause_ns'] >= max(p['pause_ns'] for p in d['processes'])")" = True ]
	one=$(awk '/^child 1 /{print $3}' "$TMP/out")
	run ctl checkpoint "$TMP/one" --pid "$one" --wait
	assert_success
	[ "$(mf "$TMP/one" "[p['pid'] for p in d['processes']]")" = "[$one]" ]
	for p in $PID $(awk '/^child/{print $3}' "$TMP/out"); do not_traced "$p"; done
	stop_fed
}

@test "a process that exits during the checkpoint is recorded as gone, or fails the job if it was asked for" {
	start_fed "$WL/ckpt_churn" big 512
	child=$(awk '/^child/{print $2}' "$TMP/out")
	# The parent's 512 MiB are copied first; the child is killed meanwhile.
	job=$(raw checkpoint-kill "{\"dir\":\"$TMP/img\",\"buffer\":16777216}" "$child")
	run ctl job "$job" --wait
	assert_success
	[ "$(mf "$TMP/img" "[p['state'] for p in d['processes'] if p['pid']==$child][0]")" = gone ]
	[ "$(mf "$TMP/img" "[p['state'] for p in d['processes'] if p['pid']==$PID][0]")" = dumped ]
	"$MEMVISOR" image verify "$TMP/img"
	not_traced "$PID"
	stop_fed

	# Asked for by pid, its exit fails the job, which cleans up.
	start_fed "$WL/ckpt_churn" big 512
	child=$(awk '/^child/{print $2}' "$TMP/out")
	job=$(raw checkpoint-kill "{\"dir\":\"$TMP/img2\",\"buffer\":16777216,\"pids\":[$PID,$child]}" "$child")
	run ctl --json job "$job" --wait
	assert_failure 1
	assert_output --partial '"code":"no_such_process"'
	assert_output --partial "process $child exited during the checkpoint"
	[ ! -e "$TMP/img2" ]
	no_temp_image
	not_traced "$PID"
	stop_fed
}

@test "processes forking and exiting all the time: every checkpoint succeeds" {
	start_fed "$WL/ckpt_churn" procs
	for i in 1 2 3 4 5 6; do
		run ctl checkpoint "$TMP/img$i" --wait
		assert_success
		"$MEMVISOR" image verify "$TMP/img$i" >/dev/null
	done
	say_until count '^forked'
	not_traced "$PID"
	stop_fed
}

@test "a program that execs all the time: every checkpoint stops it, quickly" {
	# Issue 11: a thread that execs from a non-leader thread kills the
	# others (we must reap those we hold, or the exec waits forever) and
	# takes the leader's tid (where its stop is then reported, and where
	# PTRACE_SEIZE says EPERM); about 5% of these checkpoints failed
	# with "did not stop within 10000 ms".
	start_fed "$WL/ckpt_churn" execs
	local n=${EXEC_CHECKPOINTS:-15} # 100 in make soak
	for i in $(seq "$n"); do
		rc=0
		ctl --json checkpoint "$TMP/img" --wait --stop-timeout 3 >"$TMP/job" 2>"$TMP/job.err" || rc=$?
		if [ "$rc" != 0 ]; then
			echo "checkpoint $i failed (exit $rc): $(tail -n 2 "$TMP/job.err")"
			false
		fi
		# Stopped in well under a second, however the execs fell.
		stop=$(json_get "$TMP/job" "d['result']['stop_ns']")
		[ "$stop" -lt 1000000000 ] || { echo "checkpoint $i: stop took $stop ns"; false; }
		[ "$i" != "$n" ] || "$MEMVISOR" image verify "$TMP/img" >/dev/null
		rm -rf "$TMP/img"
	done
	say_until count '^execs'
	[ "$(awk '/^execs/{n=$2} END {print n}' "$TMP/out")" -gt 60 ]
	not_traced "$PID"
	stop_fed
}

@test "the program exits during checkpoint --wait: a whole image or no_such_process, and the client says which" {
	# Issue 11: the client said "the supervisor closed the connection" or
	# "cannot send the request: Broken pipe" although the job had run,
	# and an image of 0 processes was committed.
	declare -A seen
	for i in $(seq 25); do
		start_fed "$WL/ckpt_churn" big 16
		ctl checkpoint "$TMP/img$i" --wait >"$TMP/ck.out" 2>"$TMP/ck.err" 7>&- &
		ck=$!
		# The request has arrived once its temporary directory exists
		# (made before the reply); then the program ends (stdin's end),
		# at once or a few milliseconds later.
		for _ in $(seq 20000); do
			compgen -G "$TMP/.img$i.tmp.*" >/dev/null || [ -e "$TMP/img$i" ] && break
		done
		[ $((i % 3)) = 0 ] || sleep "0.0$((i % 3 * 4))"
		exec 7>&-
		rc=0
		wait $ck || rc=$?
		wait $MVPID
		if grep -Eq "closed the connection|Broken pipe|cannot send" "$TMP/ck.err"; then
			echo "checkpoint $i: a misleading message: $(cat "$TMP/ck.err")"
			false
		fi
		case $rc in
		0)
			"$MEMVISOR" image verify "$TMP/img$i" >/dev/null
			dumped=$(mf "$TMP/img$i" "sum(p['state'] == 'dumped' for p in d['processes'])")
			[ "$dumped" -ge 1 ] || { echo "checkpoint $i: an image of $dumped processes"; false; }
			seen[image]=$((${seen[image]:-0} + 1))
			;;
		1)
			grep -q "job [0-9]* failed: the program exited during the checkpoint" "$TMP/ck.err" ||
				{ echo "checkpoint $i: $(cat "$TMP/ck.err")"; false; }
			[ ! -e "$TMP/img$i" ]
			seen[exited]=$((${seen[exited]:-0} + 1))
			;;
		*)
			echo "checkpoint $i: exit $rc: $(cat "$TMP/ck.err")"
			false
			;;
		esac
		no_temp_image
		rm -rf "$TMP/img$i"
	done
	echo "# outcomes: ${seen[image]:-0} images, ${seen[exited]:-0} no_such_process" >&3
}

@test "the first checkpoint of a fresh supervisor saves a short program before it ends: it waits for the staging buffers it needs, not for all" {
	# The first job made and warmed all its staging buffers before it
	# stopped the program: 0.35 s for 64 MiB here (4.3 s loaded), 5 s
	# for the 1 GiB asked below, so a program of 2 s had ended first
	# ("the program exited during the checkpoint"). Buffers are now
	# warmed by a thread, and the job waits only for as many as the
	# program has resident memory (a few MiB here).
	start_bg -- sleep 2
	run ctl checkpoint "$TMP/img" --buffer 1G --wait
	assert_success
	assert_output --partial "process "
	"$MEMVISOR" image verify "$TMP/img" >/dev/null
	wait $MVPID
}

@test "a slow --wait client still learns how the job ended when the program exits meanwhile" {
	# memvisor answered until its clients had been quiet for 500 ms; on
	# a loaded machine the client's 100 ms sleep between polls lasted
	# longer, and it found memvisor gone ("memvisor exited before saying
	# how job N ended"). A client polling a running job is now owed its
	# end. Here the client is stopped (SIGSTOP) for 4 s while the
	# program exits.
	start_fed "$WL/ckpt_churn" big 384
	ctl checkpoint "$TMP/img" --wait >"$TMP/ck.out" 2>"$TMP/ck.err" 7>&- &
	ck=$!
	# It follows the job once there is one (its request waits in
	# memvisor for the job's end, or a second).
	job_known() { ctl --json job 1 >/dev/null 2>&1; }
	wait_for 30 job_known
	sleep 0.2
	kill -STOP $ck
	exec 7>&-
	sleep 4
	kill -CONT $ck
	rc=0
	wait $ck || rc=$?
	wait $MVPID || true
	cat "$TMP/ck.err"
	! grep -q "exited before saying" "$TMP/ck.err"
	if [ $rc = 0 ]; then
		"$MEMVISOR" image verify "$TMP/img" >/dev/null
	else
		[ $rc = 1 ]
		grep -q "the program exited during the checkpoint" "$TMP/ck.err"
	fi
}

@test "a vfork parent, which cannot be stopped, does not hold the checkpoint up" {
	start_fed "$WL/ckpt_churn" vfork
	sleep 0.3
	run ctl checkpoint "$TMP/img" --wait --stop-timeout 3
	assert_success
	# The parent waits for its child, which the checkpoint held: recorded
	# as such, without registers; the child was stopped.
	[ "$(mf "$TMP/img" "[t['vfork_wait'] for p in d['processes'] for t in p['threads'] if t['tid']==$PID]")" = '[true]' ]
	[ "$(mf "$TMP/img" "d['totals']['processes']")" -eq 2 ]
	[ "$(mf "$TMP/img" "d['pause_ns'] < 2e9")" = True ]
	"$MEMVISOR" image verify "$TMP/img"
	sleep 1.5
	not_traced "$PID"
	stop_fed
}

@test "evict while a vfork child has not exec'd: their memory stays resident, with a note; the rest is evicted" {
	skip_unless_uffd
	# Issue 11: the evict was refused ("no thread to run a system call
	# in: No such process"): the single-threaded parent sleeps in vfork
	# while its child, which shares its memory, sleeps before its exec.
	start_fed "$WL/ckpt_churn" vfork1
	holder=$(awk '/^child/{print $2}' "$TMP/out")
	sleep 0.3
	run ctl --json checkpoint "$TMP/img" --evict --wait --stop-timeout 3
	assert_success
	echo "$output" | tail -1 >"$TMP/evict.json"
	vchild=$(json_get "$TMP/evict.json" "[p['pid'] for p in d['result']['processes'] if p['pid'] not in ($PID, $holder)][0]")
	# The parent and its vfork child: skipped, and why.
	[ "$(json_get "$TMP/evict.json" "sorted(s['pid'] for s in d['result']['evicted']['skipped'])")" = "[$PID, $vchild]" ]
	json_get "$TMP/evict.json" "[s['reason'] for s in d['result']['evicted']['skipped'] if s['pid'] == $PID][0]" |
		grep -q "waits in vfork for its child $vchild to exec or exit"
	# The other process's 4 MiB are evicted, and come back.
	[ "$(json_get "$TMP/evict.json" "d['result']['evicted']['bytes'] >= 4 << 20")" = True ]
	"$MEMVISOR" image verify "$TMP/img" >/dev/null
	run ctl reload "$TMP/img" --wait
	assert_success
	sleep 1.5
	not_traced "$PID"
	stop_fed
}

@test "ENOSPC on a small tmpfs fails the job cleanly and the program runs on" {
	[ "$(id -u)" = 0 ] || skip "needs root to mount a tmpfs"
	mkdir "$TMP/small"
	mount -t tmpfs -o size=16m tmpfs "$TMP/small" || skip "cannot mount a tmpfs here"
	start_fed "$WL/ckpt_pattern" --dense 64 --sparse 16 --threads 2
	run ctl --json checkpoint "$TMP/small/img" --wait
	assert_failure 1
	assert_output --partial '"code":"io_error"'
	assert_output --partial "No space left on device"
	# Nothing left behind, nothing that looks like an image.
	[ -z "$(ls -A "$TMP/small")" ]
	not_traced "$PID"
	say_until check '^ok'
	# And the next checkpoint, elsewhere, works.
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	stop_fed
	umount "$TMP/small"
}

@test "injected faults fail the job cleanly: clear error, nothing left, program resumed, no fd leaked" {
	for spec in ckpt_pages_open:permission_denied:io_error ckpt_pages_write:io_error ckpt_pages_sync:io_error \
		ckpt_manifest_write:io_error ckpt_rename:io_error ckpt_seize:permission_denied ckpt_read:internal; do
		point=${spec%%:*}
		code=${spec#*:}
		code=${code##*:}
		MV_ARGS=()
		MEMVISOR_FAULT=$point start_fed "$WL/ckpt_pattern" --dense 16 --sparse 64 --threads 2
		fds=$(fd_count)
		run ctl --json checkpoint "$TMP/img" --wait
		assert_failure 1
		assert_output --partial "\"code\":\"$code\""
		[ ! -e "$TMP/img" ]
		no_temp_image
		not_traced "$PID"
		say_until check '^ok'
		grep -q "fault injected at $point" "$TMP/err"
		# The fault fires once: the next checkpoint works, and memvisor
		# holds no more descriptors than before.
		run ctl checkpoint "$TMP/img" --wait
		assert_success
		"$MEMVISOR" image verify "$TMP/img" >/dev/null
		[ "$(fd_count)" -le "$fds" ]
		rm -rf "$TMP/img"
		stop_fed
	done
}

@test "the program's output is unchanged by checkpoints" {
	native=$("$WL/ckpt_churn" compute)
	start_fed "$WL/ckpt_churn" compute
	n=0
	for i in 1 2 3 4; do
		ctl checkpoint "$TMP/img$i" --wait >/dev/null 2>&1 && n=$((n + 1))
		sleep 0.2
	done
	[ "$n" -ge 2 ]
	stop_fed
	diff <(grep -v '^ready' <<<"$native") <(grep -v '^ready' "$TMP/out")
}

@test "unprivileged: shared memory through the process's memfd, or its present pages" {
	[ "$(id -u)" = 0 ] || skip "needs root to switch to nobody"
	cp "$MEMVISOR" "$WL/ckpt_pattern" "$TMP/"
	chmod 755 "$TMP/memvisor" "$TMP/ckpt_pattern"
	mkdir "$TMP/u" "$TMP/u/dump"
	chown -R nobody "$TMP/u"
	mkfifo "$TMP/in"
	chmod 666 "$TMP/in"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- env XDG_RUNTIME_DIR="$TMP/u" \
		"$TMP/memvisor" run --socket "$TMP/u/ctl.sock" -- "$TMP/ckpt_pattern" --dense 4 --sparse 16 --threads 1 \
		<"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
	remember_pid $!
	exec 7>"$TMP/in"
	wait_for 20 grep -q '^ready' "$TMP/out"
	PID=$(awk '/^ready/{print $2}' "$TMP/out")
	say_until "dump $TMP/u/dump" '^dumped'
	run setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
		"$TMP/memvisor" ctl --socket "$TMP/u/ctl.sock" checkpoint "$TMP/u/img" --wait
	assert_success
	[ "$(mf "$TMP/u/img" "sorted(o['source']+'/'+o['coverage'] for o in d['objects'])")" = '["fd/whole", "mapping/mapped"]' ]
	for spec in shared:8 memfd:12 dense:1024; do
		name=${spec%:*}
		read -r s e < <(region "$name")
		imgcmp region "$TMP/u/img" "$PID" "$s" "$e" "$TMP/u/dump/$name.bin" --pages "${spec#*:}"
	done
	[ "$(stat -c %U "$TMP/u/img/pages")" = nobody ]
	exec 7>&-
}
