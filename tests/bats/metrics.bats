#!/usr/bin/env bats
# Metrics in the Prometheus text format (issue 16): `ctl metrics` and
# `run --metrics-file`, read back with the real parser (prometheus_client,
# Debian's python3-prometheus-client, through tests/helpers/promcheck.py)
# and compared with what `stats` and `status` say; and the `help` request
# that lists the commands with the protocol version.

load helpers
bats_require_minimum_version 1.5.0

# A python3 with prometheus_client, in $PROMPY, or skip.
need_prom() {
	local py
	for py in python3 /usr/bin/python3; do
		if "$py" -c 'import prometheus_client' 2>/dev/null; then
			PROMPY=$py
			return 0
		fi
	done
	skip "python's prometheus_client is missing (Debian: python3-prometheus-client; make deps)"
}

# Parse the exposition FILE (- for stdin) with the real parser into
# $TMP/prom.json; fails with the parser's or promcheck's complaint.
prom_parse() { "$PROMPY" "$HELPERS/promcheck.py" "$1" >"$TMP/prom.json"; }

# The value of the series NAME{LABELS} of $TMP/prom.json as an integer
# (LABELS a Python dict, default none); "missing" when there is no such series.
prom_val() { # NAME [LABELS]
	local labels=${2:-'{}'}
	json_get "$TMP/prom.json" "next((int(s[2]) for f in d.values() for s in f['samples'] if s[0] == '$1' and s[1] == $labels), 'missing')"
}

# memvisor has had no notification for a moment: counts hold still.
quiet() {
	local a b
	a=$(ctl --json status | json_get - 'd["totals"]["notifications"]')
	sleep 0.3
	b=$(ctl --json status | json_get - 'd["totals"]["notifications"]')
	[ "$a" = "$b" ]
}

@test "metrics: ctl metrics is text the Prometheus parser reads, with the counts of stats and status" {
	need_prom
	start_idle --notify-all
	wait_for 20 quiet
	ctl metrics >"$TMP/m.txt"
	ctl --json stats >"$TMP/stats.json"
	ctl --json status >"$TMP/status.json"
	prom_parse "$TMP/m.txt"
	# Every family, with its type.
	run json_get "$TMP/prom.json" 'sorted((k, f["type"]) for k, f in d.items())'
	assert_output '[["memvisor_call_bytes", "counter"], ["memvisor_calls", "counter"], ["memvisor_calls_gone", "counter"], ["memvisor_committed_bytes", "gauge"], ["memvisor_evict_fault_seconds", "histogram"], ["memvisor_evict_faults", "counter"], ["memvisor_evicted_bytes", "counter"], ["memvisor_evicted_owed_bytes", "gauge"], ["memvisor_evicted_spaces", "gauge"], ["memvisor_info", "gauge"], ["memvisor_jobs", "gauge"], ["memvisor_loaded_bytes", "counter"], ["memvisor_mapped_bytes", "gauge"], ["memvisor_notifications", "counter"], ["memvisor_processes", "gauge"], ["memvisor_processes_seen", "counter"], ["memvisor_service_seconds", "histogram"], ["memvisor_start_time_seconds", "gauge"], ["memvisor_syscall_notified", "gauge"]]'
	# The same numbers as stats (calls, bytes, service times) and status.
	python3 - "$TMP/prom.json" "$TMP/stats.json" "$TMP/status.json" <<'PY'
import json, sys
prom, stats, status = (json.load(open(f)) for f in sys.argv[1:])
series = {(s[0], tuple(sorted(s[1].items()))): s[2] for f in prom.values() for s in f["samples"]}
def val(name, **labels):
    return series.get((name, tuple(sorted(labels.items()))))
t = stats["totals"]
bad = []
def same(what, got, want):
    if got != want:
        bad.append(f"{what}: metrics say {got}, memvisor's JSON {want}")
for sc, by in t["calls"].items():
    for v in ("allow", "log", "deny", "kill"):
        same(f"calls {sc} {v}", val("memvisor_calls_total", syscall=sc, verdict=v), by.get(v, 0))
listed = {dict(k[1])["syscall"] for k in series if k[0] == "memvisor_calls_total"}
same("syscalls listed", sorted(listed), sorted(t["calls"]))
for sc, n in t["bytes"].items():
    same(f"bytes {sc}", val("memvisor_call_bytes_total", syscall=sc), n)
same("notifications", val("memvisor_notifications_total"), stats["notifications"])
same("service count", val("memvisor_service_seconds_count"), t["service_ns"]["count"])
same("gone", val("memvisor_calls_gone_total"), t["gone"])
same("processes", val("memvisor_processes"), status["processes"])
same("processes seen", val("memvisor_processes_seen_total"), status["processes_seen"])
same("mapped", val("memvisor_mapped_bytes"), status["totals"]["mapped"])
same("committed", val("memvisor_committed_bytes"), status["totals"]["committed"])
for k in ("checkpoint", "reload"):
    for s in ("running", "done", "failed"):
        same(f"jobs {k} {s}", val("memvisor_jobs", kind=k, state=s), 0)
for n in ("memvisor_evicted_spaces", "memvisor_evicted_bytes_total",
          "memvisor_loaded_bytes_total", "memvisor_evict_fault_seconds_count"):
    same(n, val(n), 0)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
	[ "$(prom_val memvisor_notifications_total)" -gt 0 ]
	run json_get "$TMP/prom.json" 'sorted(d["memvisor_info"]["samples"][0][1].items())'
	assert_output "[[\"kernel\", \"$(uname -r)\"], [\"version\", \"$(cat "$ROOT/VERSION")\"]]"
	# The service-time buckets are exact: le is (2^k - 1) ns.
	run json_get "$TMP/prom.json" '[s[1]["le"] for s in d["memvisor_service_seconds"]["samples"] if "le" in s[1]][:2]'
	assert_output '["0.000000255", "0.000000511"]'
	run ctl --json metrics
	assert_success
	[ "$(echo "$output" | json_get - 'd["content_type"]')" = "text/plain; version=0.0.4; charset=utf-8" ]
	stop_idle
}

@test "run --metrics-file: there before the command runs, rewritten whole every interval, last at exit" {
	need_prom
	mkdir "$TMP/out"
	F=$TMP/out/memvisor.prom
	# The command itself finds the file there.
	run "$MEMVISOR" run --metrics-file "$TMP/out/first.prom" -- test -s "$TMP/out/first.prom"
	assert_success
	rm "$TMP/out/first.prom"
	start_idle --notify-all --metrics-file "$F" --metrics-interval 0.2 --stats-json "$TMP/s.json"
	[ "$(stat -c %a "$F")" = 644 ]
	# Each write is a new file renamed over the last: a new inode.
	ino=$(stat -c %i "$F")
	new_file() { [ "$(stat -c %i "$F" 2>/dev/null)" != "$ino" ]; }
	wait_for 10 new_file
	# Every series carries the run's name: memvisor's pid without --name.
	L="{'name': '$MVPID'}"
	wait_for 10 eval 'prom_parse "$F" && [ "$(prom_val memvisor_processes "$L")" = 1 ]'
	[ "$(prom_val memvisor_up "$L")" = 1 ]
	[ "$(stat -c %a "$F")" = 644 ]
	stop_idle
	# At exit: the final counts, what --stats-json says too, marked ended.
	prom_parse "$F"
	[ "$(prom_val memvisor_up "$L")" = 0 ]
	[ "$(prom_val memvisor_processes "$L")" = 0 ]
	[ "$(prom_val memvisor_notifications_total "$L")" = "$(stat_of 'd["notifications"]')" ]
	[ "$(prom_val memvisor_processes_seen_total "$L")" = "$(stat_of 'd["processes_seen"]')" ]
	run json_get "$TMP/prom.json" '[s[0] for f in d.values() for s in f["samples"] if s[1].get("name") != "'$MVPID'"]'
	assert_output '[]' 
	# Nothing left beside it.
	[ "$(ls -A "$TMP/out")" = memvisor.prom ]
}

@test "run --metrics-file: a file that cannot be written stops memvisor before the command runs" {
	run "$MEMVISOR" run --metrics-file "$TMP/nonexistent/m.prom" -- touch "$TMP/ran"
	[ "$status" -eq 125 ]
	assert_output "memvisor: cannot write --metrics-file $TMP/nonexistent/m.prom: No such file or directory"
	[ ! -e "$TMP/ran" ]
	mkdir "$TMP/dir"
	run "$MEMVISOR" run --metrics-file "$TMP/dir" -- touch "$TMP/ran"
	[ "$status" -eq 125 ]
	assert_output "memvisor: cannot write --metrics-file $TMP/dir: Is a directory"
	[ ! -e "$TMP/ran" ]
	[ "$(ls -A "$TMP")" = "$(printf 'dir\nrun')" ]
	for bad in 0 0.05 abc -1; do
		run "$MEMVISOR" run --metrics-file "$TMP/m.prom" --metrics-interval "$bad" -- touch "$TMP/ran"
		[ "$status" -eq 125 ]
		assert_output --partial "memvisor run: --metrics-interval: '$bad' is not a number of seconds of at least 0.1"
	done
	run "$MEMVISOR" run --metrics-interval 1 -- touch "$TMP/ran"
	[ "$status" -eq 125 ]
	assert_output --partial "memvisor run: --metrics-interval needs --metrics-file"
	[ ! -e "$TMP/ran" ]
	run "$MEMVISOR" ctl --socket "$SOCK" metrics extra
	[ "$status" -eq 2 ]
	assert_line "memvisor ctl: metrics: unexpected argument 'extra'"
}

@test "metrics: evicted, faulted and loaded bytes and the fault latencies follow an evict and a reload" {
	need_prom
	skip_unless_uffd
	MV_ARGS=()
	start_fed "$WL/reload_wl" --mib 8
	run ctl --json checkpoint "$TMP/img" --evict --wait
	assert_success
	echo "$output" | tail -1 >"$TMP/evict.json"
	say check '^ok$'
	ctl metrics | prom_parse -
	evicted=$(json_get "$TMP/evict.json" 'd["result"]["evicted"]["bytes"]')
	[ "$(prom_val memvisor_evicted_bytes_total)" = "$evicted" ]
	[ "$(prom_val memvisor_evicted_spaces)" = 1 ]
	[ "$(prom_val memvisor_jobs '{"kind": "checkpoint", "state": "done"}')" = 1 ]
	faults=$(prom_val memvisor_evict_faults_total)
	[ "$faults" -gt 0 ]
	[ "$(prom_val memvisor_evict_fault_seconds_count)" = "$faults" ]
	loaded=$(prom_val memvisor_loaded_bytes_total)
	owed=$(prom_val memvisor_evicted_owed_bytes)
	[ "$loaded" -gt 0 ]
	[ $((loaded + owed)) -le "$evicted" ]
	# status says the same of the one space.
	run ctl --json status
	[ "$(echo "$output" | json_get - '[d["evicted"][0]["faults"] >= '"$faults"', d["evicted"][0]["loaded_bytes"] >= '"$loaded"']')" = "[true, true]" ]
	run ctl --json reload "$TMP/img" --wait
	assert_success
	ctl metrics | prom_parse -
	# Done: the space is gone from the list, its counts are not.
	[ "$(prom_val memvisor_evicted_spaces)" = 0 ]
	[ "$(prom_val memvisor_evicted_owed_bytes)" = 0 ]
	[ "$(prom_val memvisor_evicted_bytes_total)" = "$evicted" ]
	[ "$(prom_val memvisor_loaded_bytes_total)" -ge "$loaded" ]
	[ "$(prom_val memvisor_evict_faults_total)" -ge "$faults" ]
	[ "$(prom_val memvisor_jobs '{"kind": "reload", "state": "done"}')" = 1 ]
	say check '^ok$'
	stop_fed
}

@test "help: the socket lists its commands and the protocol version; hello has the version too" {
	start_idle
	run ctl --json call help
	assert_success
	echo "$output" >"$TMP/help.json"
	[ "$(json_get "$TMP/help.json" 'd["protocol"]')" = 2 ]
	[ "$(json_get "$TMP/help.json" 'd["memvisor"]')" = "$(cat "$ROOT/VERSION")" ]
	run json_get "$TMP/help.json" '[c["name"] for c in d["commands"]]'
	assert_output '["hello", "status", "ps", "regions", "stats", "events", "policy", "policy_set", "job", "job_cancel", "job_unthrottle", "jobs", "checkpoint", "reload", "mark", "rollback", "unmark", "metrics", "help"]'
	# Each command it lists is one the socket knows, and hello lists the same.
	[ "$(ctl --json hello | json_get - '[c["name"] for c in d["commands"]], d["protocol"]')" = \
		"$(json_get "$TMP/help.json" '[c["name"] for c in d["commands"]], d["protocol"]')" ]
	run ctl --json call help '{"command": "metrics"}'
	assert_success
	assert_output '{"memvisor":"'"$(cat "$ROOT/VERSION")"'","protocol":2,"commands":[{"name":"metrics","summary":"counters and gauges in the Prometheus text format"}]}'
	run ctl call help '{"command": "nope"}'
	[ "$status" -eq 1 ]
	assert_output --partial "no command 'nope' (help without it lists them)"
	run raw send '{"id":1,"cmd":"help","args":{"command":5}}'
	assert_output --partial '"code":"bad_request","message":"args.command: expected a string"'
	stop_idle
}

# Two runs' files in one collector directory held the same series (no
# label told them apart): node_exporter refuses duplicates. The name label
# is --name's, and the two files read together have no series twice.
@test "run --metrics-file: two runs' files read together hold no series twice; --name names them" {
	need_prom
	mkdir "$TMP/out"
	"$MEMVISOR" run --name "mfa$$" --metrics-file "$TMP/out/a.prom" -- true
	"$MEMVISOR" run --name "mfb$$" --metrics-file "$TMP/out/b.prom" -- true
	# What node_exporter does: each file parsed, the series pooled.
	python3 - "$PROMPY" "$HELPERS/promcheck.py" "$$" "$TMP/out/a.prom" "$TMP/out/b.prom" <<'PY'
import json, subprocess, sys
seen, dups, names = set(), [], set()
for f in sys.argv[4:]:
    d = json.loads(subprocess.run([sys.argv[1], sys.argv[2], f], check=True, capture_output=True, text=True).stdout)
    for fam in d.values():
        for name, labels, _ in fam["samples"]:
            key = (name, tuple(sorted(labels.items())))
            if key in seen:
                dups.append(key)
            seen.add(key)
            names.add(labels.get("name"))
print("duplicates:", dups[:5]) if dups else None
print("names:", sorted(names, key=str))
sys.exit(1 if dups or sorted(names, key=str) != ["mfa" + sys.argv[3], "mfb" + sys.argv[3]] else 0)
PY
}
