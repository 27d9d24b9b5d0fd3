#!/usr/bin/env bats
# memvisor check (issue 16): what this kernel and this user let memvisor
# do, one line per feature, checked against what the kernel answers to a
# probe of our own that shares no code with memvisor
# (tests/helpers/kprobe.py), as root and as nobody, and under a
# supervisor, where plain supervision cannot work.

load helpers
bats_require_minimum_version 1.5.0

# Compare `check --json` (file $1) with kprobe.py's answer (file $2): the
# userfaultfd lines, the feature bits, the sysctls. Prints what differs.
same_as_probe() {
	python3 - "$1" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
k = json.load(open(sys.argv[2]))
f = c["features"]
bits = ["wp", "event_fork", "event_remap", "event_remove", "missing_hugetlbfs",
        "missing_shmem", "event_unmap", "sigbus", "thread_id", "minor_hugetlbfs",
        "minor_shmem", "exact_address", "wp_hugetlbfs_shmem", "wp_unpopulated",
        "poison", "wp_async", "move"]
feats = k["uffd_features"] or 0
want = {
    "userfaultfd": k["userfaultfd"],
    "userfaultfd_events": k["event_fork"],
    "unprivileged_userfaultfd": k["unprivileged_userfaultfd"] == 1,
    "uffdio_poison": bool(feats >> 14 & 1),
    "uffd_wp": bool(feats & 1),
    "uffd_wp_async": bool(feats >> 15 & 1),
    "uffd_missing_shmem": bool(feats >> 5 & 1),
    "uffd_sysv_shm": k["uffd_sysv_shm"],
}
bad = [f"{n}: check says {f[n]['have']}, the kernel {v}" for n, v in want.items()
       if f[n]["have"] != v]
names = [b for i, b in enumerate(bits) if feats >> i & 1]
if c["userfaultfd_features"] != names:
    bad.append(f"features: check says {c['userfaultfd_features']}, the kernel {names}")
yama = "no Yama" if k["ptrace_scope"] is None else f"kernel.yama.ptrace_scope={k['ptrace_scope']}"
if not (f["ptrace"]["note"] or "").startswith(yama):
    bad.append(f"ptrace: {f['ptrace']['note']!r} does not start with {yama!r}")
if c["modes"]["evict"] and not (k["userfaultfd"] and k["event_fork"]):
    bad.append("evict said possible without userfaultfd and its events")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}

# Whether this process has capability N in its effective set.
have_cap() { # N
	local eff
	eff=$(awk '/^CapEff:/{print $2}' /proc/self/status)
	(((0x$eff >> $1) & 1))
}

@test "check: each feature with yes or no and what needs it; exit 0 when run can work" {
	run "$MEMVISOR" check
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "memvisor $(cat "$ROOT/VERSION"), Linux $(uname -r), uid $(id -u)" ]
	assert_line --regexp '^seccomp user notification \(5\.0\) +yes +run: every supervised call \(required\)$'
	for f in SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV \
		PROCMAP_QUERY PAGEMAP_SCAN 'userfaultfd\(2\) for this user' 'unprivileged userfaultfd' \
		'uffd-wp' UFFD_FEATURE_WP_ASYNC 'missing faults on shmem' UFFDIO_POISON MADV_COLLAPSE \
		pidfd_getfd 'ptrace of the program' PIDFD_INFO_EXIT; do
		assert_line --regexp "^([^ ].*)?$f.* (yes|no) +[a-z]"
	done
	assert_line --regexp '^run +yes$'
	assert_line --regexp '^checkpoint +(yes|no: .*)$'
	assert_line --regexp '^evict +(yes|no: .*)$'
}

@test "check --json: the userfaultfd lines and feature bits are what the kernel answers a probe" {
	"$MEMVISOR" check --json >"$TMP/check.json"
	python3 "$HELPERS/kprobe.py" >"$TMP/probe.json"
	same_as_probe "$TMP/check.json" "$TMP/probe.json"
	[ "$(json_get "$TMP/check.json" 'd["ok"] and d["modes"]["run"]')" = True ]
	[ "$(json_get "$TMP/check.json" 'd["features"]["seccomp_user_notif"]["required_by"]')" = run ]
	[ "$(json_get "$TMP/check.json" 'd["features"]["uffd_wp"]["required_by"]')" = None ]
}

@test "check: root's capabilities are read, and a trial that fails says why" {
	"$MEMVISOR" check --json >"$TMP/check.json"
	want=False
	have_cap 21 && want=True
	[ "$(json_get "$TMP/check.json" 'd["features"]["cap_sys_admin"]["have"]')" = "$want" ]
	want=False
	have_cap 7 && have_cap 6 && want=True
	[ "$(json_get "$TMP/check.json" 'd["features"]["cap_setuid"]["have"]')" = "$want" ]
	if ! have_cap 19; then
		[ "$(json_get "$TMP/check.json" 'd["features"]["userfaultfd_events"]["note"]')" = \
			"UFFD_FEATURE_EVENT_FORK needs CAP_SYS_PTRACE" ]
	fi
}

@test "check under a supervisor: no seccomp listener can be had (no nesting), exit 1" {
	run "$MEMVISOR" run -- "$MEMVISOR" check
	[ "$status" -eq 1 ]
	assert_line --regexp '^seccomp user notification \(5\.0\) +no +run: '
	assert_output --partial 'already under a seccomp user-notification supervisor'
	assert_line --regexp '^run +no: seccomp user notification'
	run "$MEMVISOR" run -- "$MEMVISOR" check --json
	[ "$status" -eq 1 ]
	[ "$(echo "$output" | json_get - '[d["ok"], d["modes"]]')" = \
		"[false, {\"checkpoint\": false, \"evict\": false, \"run\": false}]" ]
}

@test "check as nobody: the lines that depend on privilege change, and still match the kernel" {
	require_root "switching to nobody needs root"
	cp "$MEMVISOR" "$HELPERS/kprobe.py" "$TMP/"
	chmod 755 "$TMP/memvisor" "$TMP/kprobe.py"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- env -i PATH=/usr/bin:/bin "$@"; }
	as_nobody "$TMP/memvisor" check --json >"$TMP/check.json"
	as_nobody python3 "$TMP/kprobe.py" >"$TMP/probe.json"
	same_as_probe "$TMP/check.json" "$TMP/probe.json"
	for f in cap_sys_admin cap_setuid userfaultfd_events; do
		[ "$(json_get "$TMP/check.json" "d['features']['$f']['have']")" = False ]
	done
	[ "$(json_get "$TMP/check.json" 'd["features"]["userfaultfd_events"]["note"]')" = \
		"UFFD_FEATURE_EVENT_FORK needs CAP_SYS_PTRACE" ]
	[ "$(json_get "$TMP/check.json" '[d["uid"], d["modes"]["evict"], d["ok"]]')" = "[65534, false, true]" ]
	# The people's form says the same, and exits 0: plain supervision works.
	run as_nobody "$TMP/memvisor" check
	[ "$status" -eq 0 ]
	assert_line --regexp '^CAP_SYS_ADMIN +no +run: .*'
	assert_line '    no_new_privs is set: such programs run unprivileged'
	assert_line --regexp '^evict +no: '
}

@test "check: usage errors exit 2 and say what is wrong; --help lists the options" {
	run "$MEMVISOR" check --bogus
	[ "$status" -eq 2 ]
	assert_output --partial "memvisor check: unknown option '--bogus'"
	run "$MEMVISOR" check extra
	[ "$status" -eq 2 ]
	assert_output --partial "memvisor check: unexpected argument 'extra'"
	run "$MEMVISOR" check --help
	[ "$status" -eq 0 ]
	assert_line --regexp '^ +-j, --json\[=MODE\] +print the result as JSON: short \(one line, the$'
	assert_line --regexp '^ +--full +lines whole on a terminal too'
	run "$MEMVISOR" --help
	assert_line --regexp '^  check +say what this kernel'
}
