#!/usr/bin/env bats
# Files a user names to memvisor (issue 24.6): the image of `ctl reload`,
# of `image info` and `image verify`, the directory `checkpoint --force`
# replaces. A FIFO, a device (or a symlink to one) or a file larger than
# any memvisor writes is refused at once and never read without bound: the
# control socket keeps answering, memvisor's memory stays small, and it
# exits when its command does. Before, a FIFO hung the main loop for good
# and /dev/zero grew memvisor ~60 MB/s until the OOM killer came.

load helpers
bats_require_minimum_version 1.5.0

# A loaded machine may keep the workload from answering for a while.
SAY_SECONDS=120

# memvisor's peak resident memory in kB (VmHWM of MVPID).
peak_kb() { proc_kb "$MVPID" VmHWM; }

# The code before this test read /dev/zero into memory without end: kill
# memvisor (MVPID, ours) should it pass 1 GiB, so that a failing run ends
# as a failure, not with the OOM killer.
guard_memory() {
	(
		while rss=$(proc_kb "$MVPID" VmRSS 2>/dev/null) && [ -n "$rss" ]; do
			if [ "$rss" -gt 1048576 ]; then
				echo "memvisor VmRSS $rss kB: killed" >"$TMP/guard"
				kill -9 "$MVPID"
				break
			fi
			sleep 0.2
		done
	) 3>&- 7>&- </dev/null >/dev/null 2>&1 &
	remember_pid $!
}

# reload_wl (8 MiB) under memvisor, evicted to $TMP/img; SUM is its
# checksum from before.
start_evicted() {
	skip_unless_uffd
	start_fed "$WL/reload_wl" --file "$TMP/F" --mib 8
	guard_memory
	say sum '^sum '
	SUM=$LAST
	run ctl --json checkpoint "$TMP/img" --evict --wait
	assert_success
}

# Replace $TMP/img/NAME with a FIFO, a symlink to /dev/zero, or a sparse
# file of 300 MiB; restore NAME puts the real one back.
spoil() { # NAME fifo|zero|huge
	[ -e "$TMP/$1.keep" ] || mv "$TMP/img/$1" "$TMP/$1.keep"
	rm -f "$TMP/img/$1"
	case $2 in
	fifo) mkfifo "$TMP/img/$1" ;;
	zero) ln -s /dev/zero "$TMP/img/$1" ;;
	huge) truncate -s 300M "$TMP/img/$1" ;;
	esac
}
restore() { rm -f "$TMP/img/$1" && mv "$TMP/$1.keep" "$TMP/img/$1"; }

# `ctl reload $TMP/img` fails at once with PATTERN in its reply, and the
# socket still answers.
reload_refused() { # PATTERN
	run ctl_within 60 --timeout 30 --json reload "$TMP/img"
	echo "$output"
	assert_failure 1
	assert_output --partial "$1"
	run ctl_within 60 --timeout 30 --json status
	assert_success
	assert_output --partial '"command_state":"running"'
}

# The program's memory comes back whole, the program ends, and memvisor
# exits after it (within a minute: not a wait on a hung main loop).
reload_and_end() {
	run ctl --json reload "$TMP/img" --wait
	assert_success
	say sum '^sum '
	[ "$LAST" = "$SUM" ]
	exec 7>&-
	wait_for 60 none_alive "$MVPID" >/dev/null
	wait "$MVPID"
}

@test "reload: a FIFO as manifest.json or as pages is refused at once; the socket answers; memvisor exits after its command" {
	start_evicted
	spoil manifest.json fifo
	reload_refused "$TMP/img/manifest.json is a FIFO, not a regular file"
	restore manifest.json
	spoil pages fifo
	reload_refused "$TMP/img/pages is a FIFO, not a regular file"
	restore pages
	[ ! -e "$TMP/guard" ]
	reload_and_end
}

@test "reload: /dev/zero (a symlink) as manifest.json or as pages is refused unread; memvisor's memory stays small" {
	start_evicted
	spoil manifest.json zero
	reload_refused "$TMP/img/manifest.json is a character device, not a regular file"
	restore manifest.json
	spoil pages zero
	reload_refused "$TMP/img/pages is a character device, not a regular file"
	restore pages
	cat "$TMP/guard" 2>/dev/null || true
	[ ! -e "$TMP/guard" ]
	echo "memvisor VmHWM $(peak_kb) kB"
	[ "$(peak_kb)" -lt 204800 ]
	reload_and_end
}

@test "reload: a manifest.json larger than any memvisor writes fails the job unread" {
	start_evicted
	spoil manifest.json huge
	run ctl_within 60 --timeout 30 --json reload "$TMP/img" --wait
	echo "memvisor VmHWM $(peak_kb) kB"
	[ "$(peak_kb)" -lt 204800 ]
	assert_failure 1
	assert_output --partial "manifest.json is 314572800 bytes: larger than any manifest memvisor writes"
	restore manifest.json
	reload_and_end
}

# An image of a small program, for the image command.
make_image() {
	start_idle
	run ctl checkpoint "$TMP/img" --wait
	assert_success
	stop_idle
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
}

# `memvisor image SUB $TMP/img` exits 1 with PATTERN on stderr, within a
# minute and with its address space capped at 256 MiB: a read without
# bound of /dev/zero or of a huge manifest runs out of it (and aborts).
image_refused() { # SUB PATTERN
	run -1 timeout 60 sh -c 'ulimit -v 262144; exec "$@"' sh "$MEMVISOR" image "$1" "$TMP/img"
	echo "$output"
	assert_output --partial "$2"
}

@test "image info and verify refuse a FIFO, /dev/zero or a huge file as manifest.json or pages, unread" {
	make_image
	for sub in info verify; do
		spoil manifest.json fifo
		image_refused $sub "$TMP/img/manifest.json is a FIFO, not a regular file"
		spoil manifest.json zero
		image_refused $sub "$TMP/img/manifest.json is a character device, not a regular file"
		spoil manifest.json huge
		image_refused $sub "larger than any manifest memvisor writes"
		restore manifest.json
		spoil pages fifo
		image_refused $sub "$TMP/img/pages is a FIFO, not a regular file"
		spoil pages zero
		image_refused $sub "$TMP/img/pages is a character device, not a regular file"
		restore pages
	done
	run "$MEMVISOR" image verify "$TMP/img"
	assert_success
}

@test "checkpoint --force over a directory whose manifest.json is a FIFO: not an image, refused at once; the socket answers" {
	start_idle
	mkdir "$TMP/img"
	mkfifo "$TMP/img/manifest.json"
	run ctl_within 60 --timeout 30 checkpoint "$TMP/img" --force
	assert_failure 1
	assert_output --partial "exists and is not a memvisor image; not replacing it"
	run ctl_within 60 --timeout 30 --json status
	assert_success
	# A symlink to an image's manifest is not followed either: what is
	# replaced is the directory as it is.
	run ctl checkpoint "$TMP/real" --wait
	assert_success
	rm "$TMP/img/manifest.json"
	ln -s "$TMP/real/manifest.json" "$TMP/img/manifest.json"
	run ctl_within 60 --timeout 30 checkpoint "$TMP/img" --force
	assert_failure 1
	assert_output --partial "is not a memvisor image"
	echo go >"$TMP/go"
	wait_for 60 none_alive "$MVPID" >/dev/null
	wait "$MVPID"
}
