#!/usr/bin/env bats
# memvisor agent (issue 17): real containers, started by Debian's runc and
# crun with a profile from `memvisor oci-profile`, hand their seccomp
# listeners to the agent. The bundle's rootfs holds static busybox and
# ctr_mem_static. runc runs the bundle as it is; crun 1.8 refuses this
# machine's hybrid cgroup layout unless cgroup2 is unmounted in a mount
# namespace of its own (unshare -m).

load helpers

setup() {
	setup_tmp
	[ "$(id -u)" = 0 ] || skip "containers need root"
	BUNDLE=$TMP/bundle
	LISTEN=$TMP/listen.sock
	ASOCK=$TMP/agent.sock
}

teardown() {
	for id in $(cat "$TMP/ids" 2>/dev/null); do
		runc delete -f "$id" >/dev/null 2>&1 || true
		crun delete -f "$id" >/dev/null 2>&1 || true
	done
	[ -z "${AGENT:-}" ] || kill -9 "$AGENT" 2>/dev/null || true
	teardown_tmp
}

need_runtime() { # RT
	command -v "$1" >/dev/null || skip "$1 is not installed (make deps)"
	[ -x /bin/busybox ] || skip "busybox-static is not installed (make deps)"
	file -L /bin/busybox 2>/dev/null | grep -q static || skip "/bin/busybox is not static"
}

# The bundle: rootfs with busybox and the workload; config from runc spec
# with PROFILE_ARGS given to oci-profile, the command in CMD.
make_bundle() { # oci-profile ARGS...
	mkdir -p "$BUNDLE/rootfs/bin" "$BUNDLE/rootfs/tmp" "$BUNDLE/rootfs/proc" "$BUNDLE/rootfs/dev"
	cp /bin/busybox "$BUNDLE/rootfs/bin/"
	for c in sh echo sleep cat; do ln -sf busybox "$BUNDLE/rootfs/bin/$c"; done
	cp "$WL/ctr_mem_static" "$BUNDLE/rootfs/bin/"
	"$MEMVISOR" oci-profile --base none --listen "$LISTEN" "$@" >"$TMP/profile.json"
	rm -f "$BUNDLE/config.json"
	(cd "$BUNDLE" && runc spec)
	python3 - "$BUNDLE/config.json" "$TMP/profile.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/sh", "-c", "exec $CMD"]
c["root"]["readonly"] = False
# Evict injects userfaultfd(2) into the container: it needs CAP_SYS_PTRACE
# there, or vm.unprivileged_userfaultfd=1 (docs/agent.md).
for k in ("bounding", "effective", "permitted"):
    c["process"]["capabilities"][k].append("CAP_SYS_PTRACE")
c["linux"]["seccomp"] = json.load(open(sys.argv[2]))
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
}

set_cmd() { # CMD (run by the container's sh)
	python3 - "$BUNDLE/config.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["env"] = [e for e in c["process"]["env"] if not e.startswith("CMD=")] + ["CMD=" + sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
}

start_agent() { # agent ARGS...
	"$MEMVISOR" agent --listen "$LISTEN" --socket "$ASOCK" --log "$TMP/agent.log" \
		--log-level info "$@" &
	AGENT=$!
	wait_for 5 test -S "$ASOCK"
}

# Start container ID with runtime RT in the background; its output goes
# to $TMP/ID.out, its exit status to $TMP/ID.rc (the subshell inherits
# bats's errexit: a failing runtime must not end it before the echo).
start_ctr() { # RT ID
	echo "$2" >>"$TMP/ids"
	if [ "$1" = crun ]; then
		(rc=0; unshare -m sh -c "umount /sys/fs/cgroup/unified 2>/dev/null; exec crun run -b '$BUNDLE' '$2'" \
			>"$TMP/$2.out" 2>&1 </dev/null || rc=$?; echo $rc >"$TMP/$2.rc") &
	else
		(rc=0; runc run -b "$BUNDLE" "$2" >"$TMP/$2.out" 2>&1 </dev/null || rc=$?; echo $rc >"$TMP/$2.rc") &
	fi
}

# Has process PID exited (gone, or a zombie)?
dead() { # PID
	local st
	st=$(awk '/^State/ {print $2}' "/proc/$1/status" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ]
}

actl() { "$MEMVISOR" ctl --socket "$ASOCK" "$@"; }

ctr_listed() { actl --json containers | json_get - "[c['id'] for c in d['containers']]" | grep -q "\"$1\""; }
ctr_gone() { ! ctr_listed "$1"; }
ctr_pid() { actl --json containers | json_get - "[c['pid'] for c in d['containers'] if c['id']=='$1'][0]"; }

# Does the runtime run containers here at all?
runtime_works() { # RT
	make_bundle
	set_cmd "echo works"
	start_agent
	start_ctr "$1" probe
	wait_for 20 test -f "$TMP/probe.rc" || true
	grep -q works "$TMP/probe.out" || skip "$1 cannot run containers here: $(head -c 300 "$TMP/probe.out")"
	kill "$AGENT"; wait "$AGENT" || true; AGENT=
	wait_for 5 test ! -S "$ASOCK"
	rm -f "$TMP/probe.rc"
}

t_visible() { # RT
	need_runtime "$1"
	runtime_works "$1"
	make_bundle --metadata name=web
	set_cmd "ctr_mem_static hold 64 /tmp"
	start_agent
	start_ctr "$1" vis1
	wait_for 20 grep -q filled "$TMP/vis1.out"
	run actl containers
	assert_success
	assert_output --regexp "vis1 +web"
	pid=$(ctr_pid vis1)
	run actl -c vis1 --json regions "$pid"
	assert_success
	echo "$output" | json_get - "[r for r in d['regions'] if r['committed'] >= 64<<20]" | grep -q start
	# The name from listenerMetadata addresses it too.
	run actl -c web --json ps
	assert_success
	assert_output --partial ctr_mem_static
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/vis1.rc"
	[ "$(cat "$TMP/vis1.rc")" = 0 ]
	wait_for 5 ctr_gone vis1
	grep -q "container vis1 dropped" "$TMP/agent.log"
}

t_quota() { # RT
	need_runtime "$1"
	runtime_works "$1"
	echo '{"version":1,"limits":{"max_mapping":"64M"}}' >"$TMP/quota.json"
	make_bundle --policy "$TMP/quota.json"
	printf '#!/bin/sh\nctr_mem_static try 32\nctr_mem_static try 128\n' >"$BUNDLE/rootfs/bin/quota.sh"
	chmod +x "$BUNDLE/rootfs/bin/quota.sh"
	set_cmd "quota.sh"
	start_agent --policy "$TMP/quota.json"
	start_ctr "$1" quota1
	wait_for 20 test -f "$TMP/quota1.rc" || { cat "$TMP/quota1.out" "$TMP/agent.log"; false; }
	# The script's status: the last try's errno.
	[ "$(cat "$TMP/quota1.rc")" = 12 ]
	cat "$TMP/quota1.out"
	grep -q "mmap: ok" "$TMP/quota1.out"
	grep -q "mmap: errno 12 (ENOMEM)" "$TMP/quota1.out"
}

t_evict() { # RT
	need_runtime "$1"
	runtime_works "$1"
	# The output of the same work without the agent or any eviction.
	mkdir -p "$TMP/native" && touch "$TMP/native/go"
	"$WL/ctr_mem_static" hold 64 "$TMP/native" >"$TMP/native.out"
	make_bundle
	set_cmd "ctr_mem_static hold 64 /tmp"
	start_agent
	start_ctr "$1" ev1
	wait_for 20 grep -q filled "$TMP/ev1.out"
	run actl -c ev1 --json checkpoint "$TMP/img" --evict --wait
	assert_success
	pid=$(ctr_pid ev1)
	rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
	echo "rss after evict: $rss kB"
	[ "$rss" -lt 32768 ]
	run actl -c ev1 --json reload "$TMP/img" --wait
	assert_success
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/ev1.rc"
	[ "$(cat "$TMP/ev1.rc")" = 0 ]
	diff <(grep checksum "$TMP/native.out") <(grep checksum "$TMP/ev1.out")
}

t_kill_agent() { # RT
	need_runtime "$1"
	runtime_works "$1"
	make_bundle
	set_cmd "ctr_mem_static hold 64 /tmp"
	start_agent
	start_ctr "$1" kill1
	wait_for 20 grep -q filled "$TMP/kill1.out"
	run actl -c kill1 --json checkpoint "$TMP/img" --evict --wait
	assert_success
	pid=$(ctr_pid kill1)
	keeper=$(pgrep -x memvisor-keep -P "$AGENT")
	[ -n "$keeper" ]
	kill -9 "$AGENT"
	AGENT=
	# The keeper kills the container; it never runs on with its memory gone.
	wait_for 10 dead "$pid"
	touch "$BUNDLE/rootfs/tmp/go"
	# The runtime reports it killed (SIGKILL: 137), and it never printed
	# a checksum of memory it could no longer read.
	wait_for 20 test -f "$TMP/kill1.rc"
	[ "$(cat "$TMP/kill1.rc")" = 137 ]
	! grep -q checksum "$TMP/kill1.out"
	# The keeper is gone too once the container is dead.
	wait_for 10 dead "$keeper"
}

# SIGHUP (systemctl reload) read the policy again instead of stopping
# the agent: it was handled as SIGTERM, and every container was killed.
t_hup() { # RT
	need_runtime "$1"
	runtime_works "$1"
	echo '{"version":1,"limits":{"max_mapping":"256M"}}' >"$TMP/pol.json"
	make_bundle --policy "$TMP/pol.json"
	set_cmd "ctr_mem_static hold 64 /tmp"
	start_agent --policy "$TMP/pol.json"
	start_ctr "$1" hup1
	wait_for 20 grep -q filled "$TMP/hup1.out"
	pid=$(ctr_pid hup1)
	# A file that does not load: everyone keeps the policy they had.
	echo '{"version":1,"limits":{"max_mapping":"lots"}}' >"$TMP/pol.json"
	kill -HUP "$AGENT"
	wait_for 10 grep -q "SIGHUP: policy .* does not load" "$TMP/agent.log"
	kill -0 "$AGENT"
	! dead "$pid"
	actl -c hup1 --json policy | grep -q '"max_mapping":268435456'
	# A good one (a looser limit: the container's filter, made for 256M,
	# notifies what it needs): every running container takes it.
	echo '{"version":1,"limits":{"max_mapping":"512M"}}' >"$TMP/pol.json"
	kill -HUP "$AGENT"
	wait_for 10 grep -q "container hup1: SIGHUP: policy .* loaded" "$TMP/agent.log"
	grep -q "sent to 1 running container" "$TMP/agent.log"
	actl -c hup1 --json policy | tee "$TMP/pol.out" | grep -q '"max_mapping":536870912' ||
		{ cat "$TMP/pol.out" "$TMP/agent.log"; false; }
	# A tighter one the filter cannot enforce: refused, with the reason.
	echo '{"version":1,"limits":{"max_mapping":"128M"}}' >"$TMP/pol.json"
	kill -HUP "$AGENT"
	wait_for 10 grep -q "container hup1: SIGHUP: policy .* not loaded.*filter fixed at launch" "$TMP/agent.log"
	actl -c hup1 --json policy | grep -q '"max_mapping":536870912'
	kill -0 "$AGENT"
	[ "$(ctr_pid hup1)" = "$pid" ]
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/hup1.rc"
	[ "$(cat "$TMP/hup1.rc")" = 0 ]
	grep -q checksum "$TMP/hup1.out"
}

rt_exec() { # RT ARGS... (runc/crun exec ARGS)
	local rt=$1
	shift
	if [ "$rt" = crun ]; then
		unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec crun exec "$@"' sh "$@"
	else
		runc exec "$@"
	fi
}

agent_tasks() { ls "/proc/$AGENT/task" | wc -l; }
agent_fds() { ls "/proc/$AGENT/fd" | wc -l; }

# runc exec (and so kubectl exec) into a supervised container: the exec'd
# process comes with a listener of its own. It was refused: runc waited
# 5 s and the process's notified calls failed with ENOSYS.
t_exec() { # RT
	need_runtime "$1"
	runtime_works "$1"
	mkdir -p "$TMP/native" && touch "$TMP/native/go"
	"$WL/ctr_mem_static" hold 16 "$TMP/native" >"$TMP/native.out"
	echo '{"version":1,"limits":{"max_mapping":"64M"}}' >"$TMP/quota.json"
	make_bundle --policy "$TMP/quota.json"
	set_cmd "ctr_mem_static hold 16 /tmp"
	start_agent --policy "$TMP/quota.json"
	start_ctr "$1" exec1
	wait_for 20 grep -q filled "$TMP/exec1.out"
	tasks0=$(agent_tasks) fds0=$(agent_fds)
	# The container's policy holds in the exec'd process.
	run rt_exec "$1" exec1 /bin/ctr_mem_static try 32
	assert_success
	assert_output --partial "mmap: ok"
	run rt_exec "$1" exec1 /bin/ctr_mem_static try 128
	[ "$status" = 12 ]
	assert_output --partial "mmap: errno 12 (ENOMEM)"
	grep -q "container exec1: process [0-9]* (exec) supervised" "$TMP/agent.log"
	# A process exec'd into it is part of the container: listed, and
	# evicted and reloaded with it, every byte back.
	mkdir -p "$BUNDLE/rootfs/tmp/x"
	rt_exec "$1" -d exec1 /bin/ctr_mem_static hold 16 /tmp/x >"$TMP/x.out" 2>&1
	wait_for 20 grep -q filled "$TMP/x.out"
	xpid=$(pgrep -f "ctr_mem_static hold 16 /tmp/x" | head -1)
	[ -n "$xpid" ]
	actl -c exec1 --json ps | grep -q "\"pid\": *$xpid\b"
	run actl -c exec1 --json checkpoint "$TMP/img" --evict --wait
	assert_success
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$xpid/status")
	echo "exec'd process's rss after evict: $rss kB"
	[ "$rss" -lt 8192 ]
	run actl -c exec1 --json reload "$TMP/img" --wait
	assert_success
	# The exec'd process first: when the init exits, the kernel kills
	# every other process of its PID namespace.
	touch "$BUNDLE/rootfs/tmp/x/go"
	wait_for 20 grep -q checksum "$TMP/x.out" || {
		cat "$TMP/x.out"
		grep -E 'State|SigPnd|ShdPnd' "/proc/$xpid/status" || true
		cat "/proc/$xpid/wchan" "/proc/$xpid/stack" 2>&1 || true
		tail -30 "$TMP/agent.log"
		false
	}
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/exec1.rc"
	[ "$(cat "$TMP/exec1.rc")" = 0 ]
	diff <(grep checksum "$TMP/native.out") <(grep checksum "$TMP/x.out")
	diff <(grep checksum "$TMP/native.out") <(grep checksum "$TMP/exec1.out")
}

# Execs as a liveness probe makes them: each listener is let go when its
# process is gone, so the agent keeps no thread or fd per exec.
t_exec_many() { # RT
	need_runtime "$1"
	runtime_works "$1"
	make_bundle
	set_cmd "ctr_mem_static hold 16 /tmp"
	start_agent
	start_ctr "$1" probe1
	wait_for 20 grep -q filled "$TMP/probe1.out"
	tasks0=$(agent_tasks) fds0=$(agent_fds)
	for i in $(seq 20); do
		run rt_exec "$1" probe1 /bin/sh -c "echo probe $i"
		[ "$status" = 0 ] || { echo "$output"; cat "$TMP/agent.log"; false; }
		assert_output "probe $i"
	done
	[ "$(grep -c "container probe1: process [0-9]* (exec) supervised" "$TMP/agent.log")" = 20 ]
	wait_for 10 sh -c "[ \$(ls /proc/$AGENT/task | wc -l) -le $tasks0 ]" ||
		{ echo "agent threads: $tasks0 before, $(agent_tasks) after"; false; }
	wait_for 10 sh -c "[ \$(ls /proc/$AGENT/fd | wc -l) -le $((fds0 + 1)) ]" ||
		{ echo "agent fds: $fds0 before, $(agent_fds) after"; false; }
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/probe1.rc"
	[ "$(cat "$TMP/probe1.rc")" = 0 ]
}

# Each container runs the policy it names (annotation or listener
# metadata memvisor.policy=NAME, a file of --policy-dir): there was one
# policy for every container.
t_policies() { # RT
	need_runtime "$1"
	runtime_works "$1"
	mkdir -p "$TMP/pols"
	echo '{"version":1,"limits":{"max_mapping":"64M"}}' >"$TMP/pols/small.json"
	echo '{"version":1,"limits":{"max_mapping":"512M"}}' >"$TMP/pols/big.json"
	local script='#!/bin/sh\nctr_mem_static try 128\nexec ctr_mem_static hold 8 /tmp\n'
	# A: the annotation names small.
	BUNDLE=$TMP/bA
	make_bundle --policy "$TMP/pols/small.json"
	printf "$script" >"$BUNDLE/rootfs/bin/p.sh" && chmod +x "$BUNDLE/rootfs/bin/p.sh"
	set_cmd p.sh
	python3 - "$BUNDLE/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.setdefault("annotations", {})["memvisor.policy"] = "small"
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
	# B: the listener metadata names big, and the container web.
	BUNDLE=$TMP/bB
	make_bundle --policy "$TMP/pols/big.json" --metadata "name=web memvisor.policy=big"
	printf "$script" >"$BUNDLE/rootfs/bin/p.sh" && chmod +x "$BUNDLE/rootfs/bin/p.sh"
	set_cmd p.sh
	# C: names none (the agent's --policy: none here), and is web too.
	BUNDLE=$TMP/bC
	make_bundle --metadata "name=web"
	printf "$script" >"$BUNDLE/rootfs/bin/p.sh" && chmod +x "$BUNDLE/rootfs/bin/p.sh"
	set_cmd p.sh
	# D: names a policy the directory does not have.
	BUNDLE=$TMP/bD
	make_bundle --metadata "memvisor.policy=nosuch"
	set_cmd "echo ran"
	start_agent --policy-dir "$TMP/pols"
	BUNDLE=$TMP/bA start_ctr "$1" pa
	BUNDLE=$TMP/bB start_ctr "$1" pb
	BUNDLE=$TMP/bC start_ctr "$1" pc
	for id in pa pb pc; do
		wait_for 20 grep -q filled "$TMP/$id.out" || { cat "$TMP/$id.out" "$TMP/agent.log"; false; }
	done
	grep -q "mmap: errno 12 (ENOMEM)" "$TMP/pa.out"
	grep -q "mmap: ok" "$TMP/pb.out"
	grep -q "mmap: ok" "$TMP/pc.out"
	run actl containers
	assert_success
	assert_output --regexp "pa +- +[0-9]+ +small "
	assert_output --regexp "pb +web +[0-9]+ +big "
	assert_output --regexp "pc +web +[0-9]+ +\(default\) "
	actl -c pa --json policy | grep -q '"max_mapping":67108864'
	# Two containers are named web: the name picks neither.
	run actl -c web ps
	assert_failure
	assert_output --regexp "several containers: (pb, pc|pc, pb)"
	# A policy that is not there: the container is refused, never run
	# under another policy.
	BUNDLE=$TMP/bD start_ctr "$1" pd
	wait_for 20 test -f "$TMP/pd.rc"
	[ "$(cat "$TMP/pd.rc")" != 0 ]
	! grep -q ran "$TMP/pd.out"
	grep -q "container pd: refused: it asks for policy nosuch" "$TMP/agent.log"
	touch "$TMP/bA/rootfs/tmp/go" "$TMP/bB/rootfs/tmp/go" "$TMP/bC/rootfs/tmp/go"
	for id in pa pb pc; do
		wait_for 20 test -f "$TMP/$id.rc"
		[ "$(cat "$TMP/$id.rc")" = 0 ]
	done
}

@test "runc: each container runs the policy its annotation or metadata names" { t_policies runc; }
@test "crun: each container runs the policy its annotation or metadata names" { t_policies crun; }
# One scrape for the node: each container's socket had to be scraped
# apart, and no series said which container it was.
@test "runc: ctl metrics and --metrics-file of the agent: every container's series, labelled, none twice" {
	need_runtime runc
	PROMPY=
	for py in python3 /usr/bin/python3; do
		"$py" -c 'import prometheus_client' 2>/dev/null && PROMPY=$py && break
	done
	[ -n "$PROMPY" ] || skip "python's prometheus_client is missing (make deps)"
	runtime_works runc
	mkdir -p "$TMP/pols"
	echo '{"version":1}' >"$TMP/pols/small.json"
	BUNDLE=$TMP/bA
	make_bundle --policy "$TMP/pols/small.json" --metadata "name=web memvisor.policy=small"
	set_cmd "ctr_mem_static hold 16 /tmp"
	BUNDLE=$TMP/bB
	make_bundle
	set_cmd "ctr_mem_static hold 16 /tmp"
	start_agent --policy-dir "$TMP/pols" --metrics-file "$TMP/node.prom" --metrics-interval 0.2
	BUNDLE=$TMP/bA start_ctr runc ma
	BUNDLE=$TMP/bB start_ctr runc mb
	wait_for 20 grep -q filled "$TMP/ma.out"
	wait_for 20 grep -q filled "$TMP/mb.out"
	run runc exec ma /bin/echo hi
	assert_success
	actl metrics >"$TMP/m.txt"
	"$PROMPY" "$HELPERS/promcheck.py" "$TMP/m.txt" >"$TMP/prom.json"
	check() { # the parsed exposition $TMP/prom.json
		python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = {(n, tuple(sorted(l.items()))): v for f in d.values() for n, l, v in f["samples"]}
def val(metric, **labels):
    return s.get((metric, tuple(sorted(labels.items()))))
a = dict(container="ma", name="web", policy="small")
b = dict(container="mb", policy="default")
bad = []
if val("memvisor_agent_containers") != 2: bad.append(f"containers {val('memvisor_agent_containers')}")
if val("memvisor_agent_up") != 1: bad.append("up")
if val("memvisor_agent_containers_started_total") != 2: bad.append("started")
for who in (a, b):
    if not (val("memvisor_processes", **who) or 0) >= 1: bad.append(f"processes of {who}")
    if not (val("memvisor_committed_bytes", **who) or 0) >= 16 << 20: bad.append(f"committed of {who}")
if val("memvisor_execs_total", **a) != 1: bad.append(f"execs of ma: {val('memvisor_execs_total', **a)}")
if val("memvisor_execs_total", **b) != 0: bad.append("execs of mb")
# Every container series has its container label.
for (n, l) in s:
    if not n.startswith("memvisor_agent_") and "container" not in dict(l):
        bad.append(f"{n} without container"); break
print("\n".join(bad)); sys.exit(1 if bad else 0)
PY
	}
	check "$TMP/prom.json"
	# The file has the same, rewritten every 0.2 s.
	wait_for 10 eval '"$PROMPY" "$HELPERS/promcheck.py" "$TMP/node.prom" >"$TMP/file.json" && check "$TMP/file.json"'
	touch "$TMP/bA/rootfs/tmp/go" "$TMP/bB/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/ma.rc"
	wait_for 20 test -f "$TMP/mb.rc"
	kill "$AGENT"
	wait "$AGENT" || true
	AGENT=
	# The last write says the agent is gone.
	"$PROMPY" "$HELPERS/promcheck.py" "$TMP/node.prom" >"$TMP/last.json"
	[ "$(json_get "$TMP/last.json" 'd["memvisor_agent_up"]["samples"][0][2]')" = 0.0 ]
}

restarts() { grep -c "restarted: " "$TMP/agent.log" || true; }

# An upgrade or a restart of the agent killed every container. SIGUSR2
# now runs the agent's binary again in place (a new one if the file was
# replaced) and every container runs on, supervised: calls in flight
# wait in the kernel, the policy still holds, an exec'd process too.
# AGENT_RESTARTS restarts (20; make soak: 200).
t_restart() { # RT
	need_runtime "$1"
	runtime_works "$1"
	mkdir -p "$TMP/native" && touch "$TMP/native/go"
	"$WL/ctr_mem_static" hold 16 "$TMP/native" >"$TMP/native.out"
	echo '{"version":1,"limits":{"max_mapping":"64M"}}' >"$TMP/quota.json"
	make_bundle --policy "$TMP/quota.json"
	# Notified calls all the time (an exec and mmaps a round), a process
	# holding memory, and the policy asked again at the end.
	printf '%s\n' '#!/bin/sh' 'ctr_mem_static hold 16 /tmp &' \
		'while [ ! -e /tmp/stop ]; do ctr_mem_static try 32 || echo FAILED; done' \
		'ctr_mem_static try 128' 'wait' >"$BUNDLE/rootfs/bin/busy.sh"
	chmod +x "$BUNDLE/rootfs/bin/busy.sh"
	set_cmd busy.sh
	mkdir -p "$BUNDLE/rootfs/tmp/x" "$TMP/bin"
	cp "$MEMVISOR" "$TMP/bin/memvisor"
	MEMVISOR=$TMP/bin/memvisor start_agent --policy "$TMP/quota.json"
	start_ctr "$1" rs1
	wait_for 20 grep -q filled "$TMP/rs1.out"
	rt_exec "$1" -d rs1 /bin/ctr_mem_static hold 8 /tmp/x >"$TMP/x.out" 2>&1
	wait_for 20 grep -q filled "$TMP/x.out"
	pid=$(ctr_pid rs1)
	fds0=$(agent_fds)
	local nr=${AGENT_RESTARTS:-20}
	for i in $(seq "$nr"); do
		if [ "$i" = 10 ]; then
			# An upgrade: the binary replaced by another file.
			cp "$MEMVISOR" "$TMP/bin/memvisor.new"
			mv -f "$TMP/bin/memvisor.new" "$TMP/bin/memvisor"
		fi
		kill -USR2 "$AGENT"
		wait_for 20 eval '[ "$(restarts)" -ge '"$i"' ]' || { tail -20 "$TMP/agent.log"; false; }
	done
	# Nothing kept twice across 20 images of the agent.
	[ "$(agent_fds)" -le $((fds0 + 1)) ] || { echo "agent fds: $fds0 before, $(agent_fds) after"; ls -l "/proc/$AGENT/fd"; false; }
	# The same process, now running the new file; the container the same.
	[ "$(stat -L -c %i "/proc/$AGENT/exe")" = "$(stat -c %i "$TMP/bin/memvisor")" ]
	[ "$(ctr_pid rs1)" = "$pid" ]
	grep -q "restart: executing $TMP/bin/memvisor again, 1 container handed over" "$TMP/agent.log"
	# Supervised still: the policy holds for a new exec, calls are counted.
	run rt_exec "$1" rs1 /bin/ctr_mem_static try 128
	[ "$status" = 12 ]
	n=$(actl -c rs1 --json status | json_get - 'd["totals"]["notifications"]')
	[ "$n" -gt 0 ]
	# Memory evicted at the restart: loaded back first, then handed over.
	run actl -c rs1 --json checkpoint "$TMP/img" --evict --wait
	assert_success
	kill -USR2 "$AGENT"
	wait_for 60 eval '[ "$(restarts)" = '"$((nr + 1))"' ]' || { echo "restarts: $(restarts)"; tail -15 "$TMP/agent.log"; false; }
	grep -q "restart: container rs1: loading its evicted memory back from $TMP/img" "$TMP/agent.log"
	# A mark cannot be handed over: refused, nothing changes.
	run actl -c rs1 --json mark --pid "$(ctr_pid rs1)"
	assert_success
	kill -USR2 "$AGENT"
	wait_for 10 grep -q "restart refused: container rs1: it holds a mark" "$TMP/agent.log"
	[ "$(restarts)" = $((nr + 1)) ]
	actl -c rs1 unmark
	kill -USR2 "$AGENT"
	wait_for 20 eval '[ "$(restarts)" = '"$((nr + 2))"' ]'
	actl metrics >"$TMP/m.txt"
	grep -qx "memvisor_agent_restarts_total{outcome=\"done\"} $((nr + 2))" "$TMP/m.txt"
	grep -qx 'memvisor_agent_restarts_total{outcome="refused"} 1' "$TMP/m.txt"
	touch "$BUNDLE/rootfs/tmp/x/go"
	wait_for 20 grep -q checksum "$TMP/x.out"
	touch "$BUNDLE/rootfs/tmp/stop" "$BUNDLE/rootfs/tmp/go"
	wait_for 30 test -f "$TMP/rs1.rc"
	cat "$TMP/rs1.out" | sort | uniq -c
	[ "$(cat "$TMP/rs1.rc")" = 0 ]
	# Nothing failed, the policy held at the end, every byte is back.
	! grep -q FAILED "$TMP/rs1.out"
	grep -q "mmap: errno 12 (ENOMEM)" "$TMP/rs1.out"
	[ "$(grep -c "mmap: ok" "$TMP/rs1.out")" -gt 10 ]
	diff <(grep checksum "$TMP/native.out") <(grep checksum "$TMP/rs1.out")
	"$WL/ctr_mem_static" hold 8 "$TMP/native" >"$TMP/native8.out"
	diff <(grep checksum "$TMP/native8.out") <(grep checksum "$TMP/x.out")
	kill -0 "$AGENT"
}

@test "runc: 20 agent restarts and an upgrade: the container runs on, supervised, every byte kept" { t_restart runc; }
@test "crun: 20 agent restarts and an upgrade: the container runs on, supervised, every byte kept" { t_restart crun; }

# A restart asked while a container's thread was still starting (just
# taken over, or just handed over by the restart before) took it for
# ended: it was freed, its thread joined while it ran, and the agent hung
# for good (CI: "restarted" never came). container_start_stall holds each
# agent's first container thread 2 s before its loop: a restart asked
# then waits for it, and hands it over.
@test "runc: a restart asked while a container is starting waits for it, and the container runs on" {
	need_runtime runc
	runtime_works runc
	make_bundle
	set_cmd "ctr_mem_static hold 8 /tmp"
	MEMVISOR_FAULT=container_start_stall start_agent 2>"$TMP/agent.err"
	start_ctr runc st1
	wait_for 20 grep -q "fault injected at container_start_stall" "$TMP/agent.err"
	pid=$(ctr_pid st1)
	# Asked while the thread sleeps: once at the start, once at each
	# restart's first container (MEMVISOR_FAULT goes with the exec).
	for i in 1 2 3; do
		kill -USR2 "$AGENT"
		wait_for 20 eval '[ "$(restarts)" -ge '"$i"' ]' || { tail -20 "$TMP/agent.log"; false; }
	done
	grep -q "restart: container st1: it is starting" "$TMP/agent.log"
	! grep -q "restart refused" "$TMP/agent.log"
	[ "$(grep -c "restart: executing .* 1 container handed over" "$TMP/agent.log")" = 3 ]
	wait_for 20 grep -q filled "$TMP/st1.out"
	[ "$(ctr_pid st1)" = "$pid" ]
	# Supervised again once the last restart's container thread runs.
	wait_for 20 eval 'actl -c st1 --json ps >"$TMP/ps.json"'
	grep -q ctr_mem_static "$TMP/ps.json"
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/st1.rc"
	[ "$(cat "$TMP/st1.rc")" = 0 ]
	mkdir -p "$TMP/native" && touch "$TMP/native/go"
	"$WL/ctr_mem_static" hold 8 "$TMP/native" >"$TMP/native8.out"
	diff <(grep checksum "$TMP/native8.out") <(grep checksum "$TMP/st1.out")
	kill -0 "$AGENT"
}

# The agent believes a runtime's exec message (its socket is root's) only
# for a process in the container's PID namespace and for a container it
# supervises: another process's listener must never join a container's
# supervision (its calls would be decided by that container's policy).
@test "runc: an exec listener for a process outside the container, or for an unknown container, is refused" {
	need_runtime runc
	runtime_works runc
	make_bundle
	set_cmd "ctr_mem_static hold 16 /tmp"
	start_agent
	start_ctr runc ex1
	wait_for 20 grep -q filled "$TMP/ex1.out"
	run "$WL/listener_send" "$LISTEN" ex1 "$(ctr_pid ex1)"
	assert_success
	wait_for 5 grep -q "container ex1: process [0-9]* (exec) refused: the process is not in the container's PID namespace" "$TMP/agent.log"
	run "$WL/listener_send" "$LISTEN" nosuch 1
	assert_success
	wait_for 5 grep -q "container nosuch: process [0-9]* (exec) refused: the container is not supervised here" "$TMP/agent.log"
	! grep -q "(exec) supervised" "$TMP/agent.log"
	actl metrics | grep -qx 'memvisor_agent_refused_total{what="exec"} 2'
	touch "$BUNDLE/rootfs/tmp/go"
	wait_for 20 test -f "$TMP/ex1.rc"
	[ "$(cat "$TMP/ex1.rc")" = 0 ]
	grep -q checksum "$TMP/ex1.out"
}

@test "runc: exec into a container is supervised by its policy; its memory is evicted and reloaded with it" { t_exec runc; }
@test "crun: exec into a container is supervised by its policy; its memory is evicted and reloaded with it" { t_exec crun; }
@test "runc: 20 execs leave no thread or fd behind in the agent" { t_exec_many runc; }
@test "crun: 20 execs leave no thread or fd behind in the agent" { t_exec_many crun; }

@test "runc: SIGHUP reads the policy again and every container takes it; none is stopped" { t_hup runc; }
@test "crun: SIGHUP reads the policy again and every container takes it; none is stopped" { t_hup crun; }

@test "oci-profile: notifies the lifecycle calls, sets listenerPath and the metadata" {
	run "$MEMVISOR" oci-profile --base none --listen /x/l.sock --metadata name=a
	assert_success
	echo "$output" | json_get - 'd["listenerPath"]' | grep -qx /x/l.sock
	echo "$output" | json_get - 'd["listenerMetadata"]' | grep -qx name=a
	echo "$output" | json_get - '[n for r in d["syscalls"] if r["action"]=="SCMP_ACT_NOTIFY" for n in r["names"]]' >"$TMP/n"
	for c in clone fork vfork execve; do grep -q "\"$c\"" "$TMP/n"; done
}

@test "oci-profile: a base profile's denials stay; its allowed calls the policy needs are notified" {
	cat >"$TMP/base.json" <<-'EOF2'
	{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
	 {"names":["read","mmap","clone"],"action":"SCMP_ACT_ALLOW"},
	 {"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_EQ"}]}]}
	EOF2
	echo '{"version":1,"wx":"deny"}' >"$TMP/wx.json"
	run "$MEMVISOR" oci-profile --base "$TMP/base.json" --policy "$TMP/wx.json" --listen /l
	assert_success
	echo "$output" >"$TMP/p.json"
	[ "$(json_get "$TMP/p.json" 'd["defaultAction"]')" = SCMP_ACT_ERRNO ]
	# read stays allowed; clone and mmap are notified; vfork (denied by
	# the base) is not notified, which would let it through.
	json_get "$TMP/p.json" '[r["names"] for r in d["syscalls"] if r["action"]=="SCMP_ACT_ALLOW"]' | grep -q read
	json_get "$TMP/p.json" '[n for r in d["syscalls"] if r["action"]=="SCMP_ACT_NOTIFY" for n in r["names"]]' >"$TMP/n"
	grep -q '"clone"' "$TMP/n"
	grep -q '"mmap"' "$TMP/n"
	! grep -q '"vfork"' "$TMP/n"
	# The conditional allow of personality becomes a notify with its condition.
	json_get "$TMP/p.json" '[r for r in d["syscalls"] if "personality" in r["names"]][0]["action"]' | grep -qx SCMP_ACT_NOTIFY
}

@test "agent: malformed messages, strangers' fds and bad ids are refused; the agent lives on" {
	start_agent
	python3 - "$LISTEN" <<'PY'
import socket, sys, os
msgs = [b"not json", b'{"fds":["seccompFd"],"pid":1,"state":{"id":"../x","pid":1}}',
        b'{"fds":["seccompFd"],"pid":2,"state":{"id":"ok","pid":1}}',
        b'{"fds":["seccompFd"],"pid":1,"state":{"id":"notalistener","pid":1}}',
        b'{' * 100000, b""]
for m in msgs:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    fd = os.open("/dev/null", os.O_RDONLY)
    try:
        s.sendmsg([m or b" "], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(bytearray(fd.to_bytes(4, "little")))))])
    except OSError:
        pass
    s.close()
    os.close(fd)
PY
	sleep 0.5
	kill -0 "$AGENT"
	run actl containers
	assert_success
	assert_output --partial "0 containers"
	grep -q "refused" "$TMP/agent.log"
	grep -q "not a seccomp listener" "$TMP/agent.log"
}

# Issue 27: the agent's default sockets were in the runtime directory
# of every run: ctl --list probed the runtimes' listener (which logged a
# refused message) and counted the agent as supervisors.
@test "agent: its default sockets are in a directory of their own; ctl --list and ctl ps see only run's supervisors" {
	require_root
	[ ! -S /run/memvisor/agent/agent.sock ] || skip "an agent already runs here"
	"$MEMVISOR" agent --log "$TMP/agent.log" --log-level info 2>"$TMP/agent.err" &
	AGENT=$!
	wait_for 5 test -S /run/memvisor/agent/agent.sock
	[ -S /run/memvisor/agent/seccomp.sock ]
	mkfifo "$TMP/go"
	"$MEMVISOR" run -- sh -c "read x <'$TMP/go'" </dev/null &
	MVPID=$!
	remember_pid $MVPID
	wait_for 10 sh -c "ls '$XDG_RUNTIME_DIR'/memvisor/*.sock"
	run "$MEMVISOR" ctl --list
	echo "$output"
	assert_success
	refute_output --partial agent
	refute_output --partial seccomp
	run "$MEMVISOR" ctl ps
	assert_success
	run "$MEMVISOR" ctl --socket /run/memvisor/agent/agent.sock hello
	assert_output --partial "memvisor agent"
	! grep -q "refused" "$TMP/agent.log"
	kill "$AGENT"
	wait "$AGENT" || true
	AGENT=
	echo go >"$TMP/go"
	wait "$MVPID"
}

# Under a systemd unit of Type=notify (contrib/memvisor-agent.service):
# READY=1 once it listens, RELOADING=1 and READY=1 around a SIGHUP,
# STOPPING=1 at the end.
@test "agent: tells the service manager when it is ready, reloading and stopping (sd_notify)" {
	python3 - "$TMP/notify.sock" "$TMP/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as log:
    while True:
        m = s.recv(4096).decode()
        log.write(m.replace("\n", " ") + "\n")
        log.flush()
        if m.startswith("STOPPING=1"):
            break
PY
	NPID=$!
	remember_pid $NPID
	wait_for 5 test -S "$TMP/notify.sock"
	NOTIFY_SOCKET=$TMP/notify.sock start_agent
	wait_for 5 grep -q '^READY=1' "$TMP/notify.log"
	grep -q "^READY=1 STATUS=runtimes connect to $LISTEN; control socket $ASOCK$" "$TMP/notify.log"
	kill -HUP "$AGENT"
	wait_for 5 grep -q '^RELOADING=1 MONOTONIC_USEC=[0-9]*$' "$TMP/notify.log"
	wait_for 5 sh -c "[ \$(grep -c '^READY=1' '$TMP/notify.log') = 2 ]"
	kill -0 "$AGENT"
	kill -TERM "$AGENT"
	wait "$AGENT" || true
	AGENT=
	wait_for 5 grep -q '^STOPPING=1$' "$TMP/notify.log"
	wait "$NPID"
}

@test "agent: its control socket and the listen socket are 0600; ctl answers the agent's commands only" {
	start_agent 2>"$TMP/agent.err"
	# One line says where it listens, at the default level too.
	grep -q "memvisor agent .*: runtimes connect to $LISTEN; control socket $ASOCK; policy none" "$TMP/agent.err"
	run actl hello
	assert_success
	assert_output --partial "memvisor agent "
	assert_output --partial "runtimes connect to: $LISTEN"
	assert_output --partial "containers:          0"
	refute_output --partial "protocol 0"
	[ "$(stat -c %a "$ASOCK")" = 600 ]
	[ "$(stat -c %a "$LISTEN")" = 600 ]
	run actl ps
	assert_failure 1
	assert_output --partial "ctl -c ID"
}

@test "runc: a container mapping memory is in ctl containers and regions; ctl -c takes its id or name" { t_visible runc; }
@test "crun: a container mapping memory is in ctl containers and regions; ctl -c takes its id or name" { t_visible crun; }
@test "runc: a quota policy returns ENOMEM inside the container" { t_quota runc; }
@test "crun: a quota policy returns ENOMEM inside the container" { t_quota crun; }
@test "runc: checkpoint --evict and reload keep the container's output identical" { t_evict runc; }
@test "crun: checkpoint --evict and reload keep the container's output identical" { t_evict crun; }
@test "runc: killing the agent kills a container with evicted memory; it never runs on" { t_kill_agent runc; }
@test "crun: killing the agent kills a container with evicted memory; it never runs on" { t_kill_agent crun; }

@test "runc: a container that reaches the agent's sockets is refused, its own container's too" {
	need_runtime runc
	runtime_works runc
	make_bundle
	# The sockets' directory, bind-mounted into the container on purpose.
	python3 - "$BUNDLE/config.json" "$TMP" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["mounts"].append({"destination": "/s", "type": "bind", "source": sys.argv[2], "options": ["rbind"]})
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
	printf '#!/bin/sh\nctr_mem_static ask /s/agent.sock\nctr_mem_static ask /s/agent.sock.d/sock1.sock\n' >"$BUNDLE/rootfs/bin/ask.sh"
	chmod +x "$BUNDLE/rootfs/bin/ask.sh"
	set_cmd "ask.sh"
	start_agent
	start_ctr runc sock1
	two_answers() { [ "$(grep -c '^reply:\|^connect:' "$TMP/sock1.out" 2>/dev/null)" = 2 ]; }
	wait_for 20 two_answers || { cat "$TMP/sock1.out"; false; }
	cat "$TMP/sock1.out"
	[ "$(grep -c '"code":"forbidden"' "$TMP/sock1.out")" = 2 ]
	! grep -q '"ok":true' "$TMP/sock1.out"
}

@test "runc: 20 containers started and stopped leave no fd or memory growth in the agent" {
	need_runtime runc
	runtime_works runc
	make_bundle
	set_cmd "ctr_mem_static try 1"
	start_agent
	one() { # ID
		rm -f "$TMP/$1.rc"
		start_ctr runc "$1"
		wait_for 20 test -f "$TMP/$1.rc"
		[ "$(cat "$TMP/$1.rc")" = 0 ]
		runc delete -f "$1" >/dev/null 2>&1 || true
	}
	for i in 1 2 3; do one warm$i; done
	wait_for 5 bash -c "! $MEMVISOR ctl --socket $ASOCK --json containers | grep -q '\"id\"'"
	fd0=$(ls /proc/$AGENT/fd | wc -l)
	rss0=$(awk '/VmRSS/ {print $2}' /proc/$AGENT/status)
	for i in $(seq 1 20); do one loop$i; done
	wait_for 5 bash -c "! $MEMVISOR ctl --socket $ASOCK --json containers | grep -q '\"id\"'"
	fd1=$(ls /proc/$AGENT/fd | wc -l)
	rss1=$(awk '/VmRSS/ {print $2}' /proc/$AGENT/status)
	threads=$(ls /proc/$AGENT/task | wc -l)
	echo "fds $fd0 -> $fd1, rss $rss0 -> $rss1 kB, threads $threads"
	[ "$fd1" -le "$fd0" ]
	[ "$rss1" -le $((rss0 + 1024)) ]
	[ "$threads" -eq 1 ]
	[ "$(grep -c 'dropped' "$TMP/agent.log")" -ge 23 ]
}
