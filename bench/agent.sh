#!/usr/bin/env bash
# bench/agent.sh BUILD_DIR: what `memvisor agent` costs a container, next
# to what `memvisor run` costs the same work (bench/README.md, "Agent").
#
# One workload, run four ways in every repetition (ABBA order across
# repetitions): a runc container without a listener (native container),
# the same container with the profile of `memvisor oci-profile` under a
# running agent, the workload on the host, and on the host under
# `memvisor run`. Each is timed from start to exit (wall time, so the
# runtime's own start-up is in both container figures). Prints medians
# and the two ratios. Needs root, runc and busybox-static.
#
# Knobs: AGENT_REPS=7, AGENT_FORKS=40 (the workload's fork+exec count),
# AGENT_MB=64 (memory it maps and touches, 1 MiB at a time),
# AGENT_MV_ARGS (given to both oci-profile and run, e.g. --notify-all).
set -euo pipefail
export LC_ALL=C
BUILD=${1:-build}
MV=$(cd "$BUILD" && pwd)/memvisor
WL=$(cd "$BUILD" && pwd)/workloads
REPS=${AGENT_REPS:-7}
FORKS=${AGENT_FORKS:-40}
MB=${AGENT_MB:-64}
read -r -a MV_ARGS <<<"${AGENT_MV_ARGS:-}"
[ "$(id -u)" = 0 ] || { echo "bench/agent.sh: needs root" >&2; exit 1; }
command -v runc >/dev/null || { echo "bench/agent.sh: runc is not installed" >&2; exit 1; }
echo "command: AGENT_REPS=$REPS AGENT_FORKS=$FORKS AGENT_MB=$MB AGENT_MV_ARGS='${AGENT_MV_ARGS:-}' bench/agent.sh $BUILD"

T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-agent-bench.XXXXXX")
AGENT=
cleanup() {
	[ -z "$AGENT" ] || kill "$AGENT" 2>/dev/null || true
	umount "$T/native/rootfs" "$T/agent/rootfs" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

# The workload: FORKS fork+execs of busybox true, then MB one-MiB
# mappings (ctr_mem_static try), as one shell script.
mkdir -p "$T/rootfs/bin" "$T/rootfs/tmp" "$T/rootfs/proc" "$T/rootfs/dev"
cp /bin/busybox "$WL/ctr_mem_static" "$T/rootfs/bin/"
for c in sh true seq; do ln -sf busybox "$T/rootfs/bin/$c"; done
cat >"$T/rootfs/bin/work.sh" <<W
#!/bin/sh
for i in \$(seq $FORKS); do /bin/true; done
for i in \$(seq $MB); do ctr_mem_static try 1 >/dev/null; done
W
chmod +x "$T/rootfs/bin/work.sh"

bundle() { # DIR SECCOMP-JSON-FILE|-
	mkdir -p "$1/rootfs" && mount --bind "$T/rootfs" "$1/rootfs"
	(cd "$1" && runc spec)
	python3 - "$1/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/work.sh"]
c["root"]["readonly"] = False
if sys.argv[2] != "-":
    c["linux"]["seccomp"] = json.load(open(sys.argv[2]))
json.dump(c, open(sys.argv[1], "w"))
PY
}
"$MV" oci-profile "${MV_ARGS[@]}" --base none --listen "$T/listen.sock" >"$T/profile.json"
bundle "$T/native" -
bundle "$T/agent" "$T/profile.json"
"$MV" agent --listen "$T/listen.sock" --socket "$T/agent.sock" --log "$T/agent.log" &
AGENT=$!
for _ in $(seq 100); do [ -S "$T/agent.sock" ] && break; sleep 0.05; done

now() { echo "${EPOCHREALTIME/./}"; }
n=0
timed() { # KIND CMD...
	local t0 t1
	t0=$(now)
	"${@:2}" >"$T/out" 2>&1 || { echo "bench/agent.sh: $1 failed: $(head -c 300 "$T/out")" >&2; exit 1; }
	t1=$(now)
	echo "$1 $(((t1 - t0)))" >>"$T/raw"
}
ctr() { # BUNDLE: run it, then delete it (its status is run's)
	n=$((n + 1))
	local rc=0
	runc run -b "$T/$1" "b$n" </dev/null || rc=$?
	runc delete -f "b$n" 2>/dev/null || true
	return $rc
}
host() { PATH=$T/rootfs/bin:$PATH sh "$T/rootfs/bin/work.sh"; }
for r in $(seq "$REPS"); do
	if [ $((r % 2)) = 1 ]; then
		timed ctr_native ctr native; timed ctr_agent ctr agent
		timed host_native host; timed host_run "$MV" run "${MV_ARGS[@]}" -- sh -c "PATH=$T/rootfs/bin:\$PATH sh $T/rootfs/bin/work.sh"
	else
		timed ctr_agent ctr agent; timed ctr_native ctr native
		timed host_run "$MV" run "${MV_ARGS[@]}" -- sh -c "PATH=$T/rootfs/bin:\$PATH sh $T/rootfs/bin/work.sh"; timed host_native host
	fi
done
python3 - "$T/raw" <<'PY'
import sys, statistics
d = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    d.setdefault(k, []).append(int(v) / 1000)
m = {k: statistics.median(v) for k, v in d.items()}
print("| what | median ms (n=%d) |" % len(d["ctr_native"]))
print("|---|---|")
for k in ("ctr_native", "ctr_agent", "host_native", "host_run"):
    print("| %s | %.1f |" % (k, m[k]))
print()
print("agent: container under the agent / native container = %.3f (+%.1f ms)" % (m["ctr_agent"] / m["ctr_native"], m["ctr_agent"] - m["ctr_native"]))
print("run:   host under memvisor run / native host        = %.3f (+%.1f ms)" % (m["host_run"] / m["host_native"], m["host_run"] - m["host_native"]))
PY
