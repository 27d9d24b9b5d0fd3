#!/usr/bin/env bats
# The control socket's boundaries (docs/protocol.md, "Who may connect and
# do what"; issue 12): a supervised program cannot steer its supervisor,
# another user cannot plant the runtime directory, files memvisor creates
# cannot be redirected by a symlink, a FIFO cannot block the main loop,
# and what memvisor keeps for jobs and clients is bounded.

load helpers
bats_require_minimum_version 1.5.0

teardown() {
	release_go
	teardown_tmp
}

@test "a supervised program cannot change its own policy over the socket, nor query it" {
	# A quota the command (and an ASan build of ctl) lives with.
	printf '{"version": 1, "limits": {"max_regions": 100000}}\n' >"$TMP/quota.json"
	printf '{"version": 1}\n' >"$TMP/open.json"
	# The command, and an orphan it leaves behind (reparented to the
	# reaper, still supervised), each try to lift the quota; then the
	# command waits for $TMP/go.
	start_bg --policy "$TMP/quota.json" -- sh -c '
		"$MEMVISOR" ctl --socket "$0" policy set "$1/open.json" >"$1/direct" 2>&1; echo "rc $?" >>"$1/direct"
		( setsid sh -c "\"\$MEMVISOR\" ctl --socket \"$0\" policy set \"$1/open.json\" >\"$1/orphan\" 2>&1; echo rc \$? >>\"$1/orphan\"" & )
		python3 "$2" "$0" send "{\"id\":1,\"cmd\":\"status\"}" >"$1/raw" 2>&1
		while [ ! -e "$1/go" ]; do sleep 0.05; done' "$SOCK" "$TMP" "$HELPERS/ctlraw.py"
	wait_for 10 test -s "$TMP/raw"
	wait_for 10 grep -q '^rc' "$TMP/orphan"
	cat "$TMP/direct" "$TMP/orphan" "$TMP/raw"
	grep -q 'memvisor ctl: requests from a supervised process are refused' "$TMP/direct"
	grep -q '^rc 1$' "$TMP/direct"
	grep -q 'refused' "$TMP/orphan"
	grep -q '^rc 1$' "$TMP/orphan"
	grep -q '"code":"forbidden"' "$TMP/raw"
	# From outside the tree, the same socket answers, and the quota holds.
	run ctl --json policy
	assert_success
	echo "$output" >"$TMP/show.json"
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["source"]')" = "$TMP/quota.json" ]
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["policy"]["limits"]["max_regions"]')" -eq 100000 ]
	touch "$TMP/go"
	wait $MVPID
}

@test "a runtime directory another user made first is refused, and ctl does not talk to their socket" {
	require_root "needs root to act as another user"
	dir=$XDG_RUNTIME_DIR/memvisor
	chmod 755 "$TMP" "$XDG_RUNTIME_DIR"
	chmod 1777 "$XDG_RUNTIME_DIR" # a shared place, like /tmp
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- sh -c "umask 0; mkdir '$dir' && chmod 777 '$dir'"
	# Without --socket a missing socket is not fatal (the command runs,
	# with a warning), but nothing is put in that directory.
	run "$MEMVISOR" run -- sh -c 'echo ran; ls -A "$0"' "$dir"
	assert_success
	assert_output --partial "runtime directory $dir belongs to uid 65534"
	assert_output --partial "running without a control socket"
	assert_line --index 2 ran
	[ "${#lines[@]}" -eq 3 ]
	# nobody listens there; ctl must send it nothing, found or named.
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "w").close()
s.settimeout(3)
got = b""
try:
    while True:
        c, _ = s.accept(); c.settimeout(0.5)
        try:
            got += c.recv(4096)
        except OSError:
            pass
except OSError:
    pass
open(sys.argv[2] + ".got", "wb").write(got)' "$dir/4242.sock" "$dir/listening" &
	evil=$!
	remember_pid $evil
	wait_for 5 test -e "$dir/listening"
	run "$MEMVISOR" ctl --socket "$dir/4242.sock" status
	[ "$status" -eq 3 ]
	assert_output --partial "refusing to talk to $dir/4242.sock"
	assert_output --partial "belongs to uid 65534"
	run "$MEMVISOR" ctl status
	[ "$status" -eq 3 ]
	wait $evil
	[ -e "$dir/listening.got" ]
	[ ! -s "$dir/listening.got" ]
	# A directory of ours that others may enter is refused too.
	rm -rf "$dir"
	mkdir -m 755 "$dir"
	run "$MEMVISOR" run -- true
	assert_success
	assert_output --partial "runtime directory $dir has mode 0755"
	# A missing one is made private, and used.
	rmdir "$dir"
	run "$MEMVISOR" run -- true
	assert_success
	refute_output --partial "without a control socket"
	[ "$(stat -c %a "$dir")" = 700 ]
}

@test "--stats-json writes through no planted symlink: the temporary file is made exclusively" {
	# A directory others may write (not sticky, so the kernel's
	# protected_symlinks does not step in) holding the stats file.
	mkdir -m 777 "$TMP/shared"
	echo precious >"$TMP/victim"
	# The old temporary name was PATH.tmp.PID: plant it for the pid that
	# memvisor will have (exec keeps the shell's pid).
	run sh -c 'ln -s "$2" "$1.tmp.$$"; exec "$0" run --stats-json "$1" -- true' \
		"$MEMVISOR" "$TMP/shared/stats.json" "$TMP/victim"
	assert_success
	[ "$(cat "$TMP/victim")" = precious ]
	[ "$(json_get "$TMP/shared/stats.json" 'd["exit_status"]')" = 0 ]
	[ "$(stat -c %a "$TMP/shared/stats.json")" = 600 ]
	# Only the planted link is left beside it: no temporary file.
	[ "$(ls "$TMP/shared" | wc -l)" -eq 2 ]
}

@test "--log does not follow a symlink another user planted" {
	require_root "needs root to plant a symlink as another user"
	mkdir -m 777 "$TMP/shared"
	echo precious >"$TMP/victim"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- ln -s "$TMP/victim" "$TMP/shared/mv.log"
	run "$MEMVISOR" run --log "$TMP/shared/mv.log" --log-level debug -- true
	assert_failure 125
	assert_output --partial "cannot open log file $TMP/shared/mv.log"
	[ "$(cat "$TMP/victim")" = precious ]
	# A symlink of our own is followed (--log /dev/stderr works).
	ln -s "$TMP/mine.log" "$TMP/link.log"
	run "$MEMVISOR" run --log "$TMP/link.log" --log-level debug -- true
	assert_success
	[ -s "$TMP/mine.log" ]
}

@test "policy set naming a FIFO, a device or a huge file is refused at once; the socket keeps answering" {
	mkfifo "$TMP/fifo"
	head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$TMP/huge.json"
	start_idle
	run ctl_within 5 --timeout 3 policy set "$TMP/fifo"
	[ "$status" -eq 1 ]
	assert_output --partial "$TMP/fifo: not a regular file"
	run ctl_within 5 --timeout 3 policy set /dev/zero
	[ "$status" -eq 1 ]
	assert_output --partial "not a regular file"
	run ctl_within 5 --timeout 3 policy set "$TMP/huge.json"
	[ "$status" -eq 1 ]
	assert_output --partial "larger than 1048576 bytes"
	run ctl_within 5 --timeout 3 --json status
	assert_success
	assert_output --partial '"command_state":"running"'
	stop_idle
}

@test "finished jobs are kept up to 64; job ID of a forgotten one says so" {
	start_idle
	# 70 checkpoints, one after another on one connection, each image
	# removed once its job is done.
	raw checkpoints 70 "$TMP"
	run ctl --json jobs
	assert_success
	echo "$output" >"$TMP/jobs.json"
	[ "$(json_get "$TMP/jobs.json" 'len(d["jobs"])')" -eq 64 ]
	[ "$(json_get "$TMP/jobs.json" 'min(j["id"] for j in d["jobs"])')" -eq 7 ]
	run ctl job 6
	[ "$status" -eq 1 ]
	assert_output --partial "job 6 is no longer kept (memvisor keeps the last 64 finished jobs)"
	run ctl --json job 70
	assert_success
	assert_output --partial '"state":"done"'
	run ctl job 71
	[ "$status" -eq 1 ]
	assert_output --partial "no job 71"
	stop_idle
}

@test "clients that never read their replies cannot make memvisor buffer without bound" {
	start_idle
	rss0=$(proc_kb $MVPID VmRSS)
	pid=$(command_pid)
	# 16 clients each send regions requests (some KiB of reply each) for
	# 4 s and never read; then, still connected, they wait for $TMP/go2.
	python3 - "$SOCK" "$TMP" "$pid" <<'PY' &
import os, socket, sys, time
line = (b'{"id":1,"cmd":"regions","args":{"pid":%s}}\n' % sys.argv[3].encode()) * 1000
socks = []
for i in range(16):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.setblocking(False)
    socks.append(s)
sent, end = 0, time.time() + 4
while time.time() < end:
    for s in socks:
        try:
            sent += s.send(line)
        except BlockingIOError:
            pass
    time.sleep(0.001)
open(sys.argv[2] + "/sent", "w").write("%d\n" % sent)
while not os.path.exists(sys.argv[2] + "/go2"):
    time.sleep(0.05)
PY
	hogs=$!
	remember_pid $hogs
	wait_for 20 test -s "$TMP/sent"
	rss=$(proc_kb $MVPID VmRSS)
	echo "sent $(cat "$TMP/sent") bytes of requests; memvisor RSS ${rss0} kB -> ${rss} kB" >&3
	# The requests alone would have asked for far more than was buffered.
	[ "$(cat "$TMP/sent")" -gt $((1 << 20)) ] || skip "too slow a machine to fill the buffers"
	# Each client holds at most about 1 MiB unread (2 MiB of buffer).
	# An ASan build keeps freed memory in its quarantine: RSS not checked.
	[ -n "${SANITIZER_REPORTS:-}" ] || [ "$rss" -lt $((rss0 + 48 * 1024)) ]
	# Others are served meanwhile.
	run ctl_within 5 --json status
	assert_success
	touch "$TMP/go2"
	wait $hogs
	stop_idle
}

@test "large replies nobody reads: past 64 MiB over all clients the biggest are disconnected" {
	mkfifo "$TMP/go"
	# A command with 20,000 regions (alternate protections do not merge):
	# a regions reply of several MiB.
	start_bg -- python3 -c '
import mmap, sys
m = [mmap.mmap(-1, 4096, prot=mmap.PROT_READ if i % 2 else mmap.PROT_READ | mmap.PROT_WRITE) for i in range(20000)]
print("ready", flush=True)
open(sys.argv[1]).read()' "$TMP/go" >"$TMP/out"
	wait_for 30 grep -q ready "$TMP/out"
	rss0=$(proc_kb $MVPID VmRSS)
	pid=$(command_pid)
	# 24 clients ask for it twice and read nothing; then count the
	# connections memvisor closed (EOF after the data in the socket).
	run timeout 60 python3 - "$SOCK" "$pid" "$MVPID" <<'PY'
import socket, sys, time
req = b'{"id":1,"cmd":"regions","args":{"pid":%s}}\n' % sys.argv[2].encode()
socks = []
for i in range(24):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(req * 2)
    socks.append(s)
time.sleep(5)
rss = int([l.split()[1] for l in open("/proc/%s/status" % sys.argv[3]) if l.startswith("VmRSS")][0])
closed = 0
for s in socks:
    s.settimeout(0.5)
    try:
        while True:
            b = s.recv(1 << 20)
            if not b:
                closed += 1
                break
    except socket.timeout:
        pass
    except OSError:
        closed += 1
print("rss", rss, "closed", closed)
PY
	echo "$output" >&3
	assert_success
	rss=$(echo "$output" | awk '{print $2}')
	closed=$(echo "$output" | awk '{print $4}')
	[ "$closed" -gt 0 ]
	[ -n "${SANITIZER_REPORTS:-}" ] || [ "$rss" -lt $((rss0 + 160 * 1024)) ]
	run ctl_within 5 --json status
	assert_success
	stop_idle
}
