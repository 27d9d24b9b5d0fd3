#!/usr/bin/env bats
# contrib/: the systemd unit and the Kubernetes manifest that deploy
# memvisor agent (issue 27). No systemd runs here as the service manager
# and no cluster: the unit is checked by systemd-analyze, the manifest
# parsed, and the commands each gives run as they would on a node, with
# their paths moved into the test's directory.

load helpers

CONTRIB=$ROOT/contrib

setup() {
	setup_tmp
}

teardown() {
	[ -z "${AGENT:-}" ] || kill -9 "$AGENT" 2>/dev/null || true
	teardown_tmp
}

# The manifest's documents as JSON, one per line.
manifest_docs() {
	python3 -c 'import json, sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    print(json.dumps(d))' "$CONTRIB/kubernetes/memvisor-agent.yaml"
}

skip_unless_yaml() { python3 -c 'import yaml' 2>/dev/null || skip "python3 has no yaml module (python3-yaml)"; }

@test "contrib: the systemd unit verifies without a warning, and runs what the binary takes" {
	command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
	sed "s|/usr/local/bin/memvisor|$MEMVISOR|; s|/etc/memvisor/policy.json|$TMP/policy.json|" \
		"$CONTRIB/memvisor-agent.service" >"$TMP/memvisor-agent.service"
	cp "$ROOT/policy/examples/quota.json" "$TMP/policy.json"
	run systemd-analyze verify --man=no "$TMP/memvisor-agent.service"
	echo "$output"
	assert_success
	[ -z "$output" ]
	grep -qx 'Type=notify' "$TMP/memvisor-agent.service"
	grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$TMP/memvisor-agent.service"
	# Its ExecStart, with sockets of this test's, starts and answers.
	read -r -a cmd <<<"$(sed -n 's/^ExecStart=//p' "$TMP/memvisor-agent.service")"
	[ "$(id -u)" = 0 ] || skip "the agent needs root"
	"${cmd[@]}" --listen "$TMP/l.sock" --socket "$TMP/a.sock" 2>"$TMP/agent.err" &
	AGENT=$!
	wait_for 5 test -S "$TMP/a.sock"
	run "$MEMVISOR" ctl --socket "$TMP/a.sock" hello
	assert_success
	assert_output --partial "policy:"
	assert_output --partial "$TMP/policy.json"
}

@test "contrib: the Kubernetes manifest parses; its policies are valid; its commands run as on a node" {
	skip_unless_yaml
	manifest_docs >"$TMP/docs"
	mkdir "$TMP/etc"
	python3 - "$TMP/docs" "$TMP" <<'PY'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
kinds = [d["kind"] for d in docs]
assert kinds == ["ConfigMap", "DaemonSet"], kinds
cm, ds = docs
assert "policy.json" in cm["data"], cm["data"].keys()
for k, v in cm["data"].items():
    open(sys.argv[2] + "/etc/" + k, "w").write(v)
spec = ds["spec"]["template"]["spec"]
assert spec["hostPID"] is True
assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
for c in spec["initContainers"] + spec["containers"]:
    assert c["command"][:2] == ["chroot", "/host"], c["command"]
    assert c["securityContext"]["privileged"] is True
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts == {"host": "/host", "policy": "/host/etc/memvisor"}, mounts
vols = {v["name"] for v in spec["volumes"]}
assert vols == {"host", "policy"}, vols
json.dump({"init": spec["initContainers"][0]["command"][2:],
           "agent": spec["containers"][0]["command"][2:],
           "probe": spec["containers"][0]["readinessProbe"]["exec"]["command"][2:]},
          open(sys.argv[2] + "/cmds.json", "w"))
PY
	for f in "$TMP"/etc/*.json; do
		run "$MEMVISOR" policy check "$f"
		echo "$output"
		assert_success
	done
	# What each container runs on the node, with the node's paths in $TMP.
	node_cmd() { # KEY
		json_get "$TMP/cmds.json" "d['$1']" | python3 -c 'import json, sys
for a in json.load(sys.stdin):
    print(a)' | sed "s|^memvisor$|$MEMVISOR|; s|/etc/memvisor|$TMP/etc|g; \
		s|/var/lib/kubelet/seccomp|$TMP/seccomp|g; s|/run/memvisor/agent/|$TMP/|g; \
		s|memvisor oci-profile|$MEMVISOR oci-profile|"
	}
	mapfile -t init < <(node_cmd init)
	"${init[@]}"
	json_get "$TMP/seccomp/memvisor.json" 'd["listenerPath"]' | grep -qx "$TMP/seccomp.sock"
	json_get "$TMP/seccomp/memvisor.json" '[s for s in d["syscalls"] if s["action"] == "SCMP_ACT_NOTIFY"] != []' | grep -qx True
	# One profile for each other policy, naming it for the agent.
	json_get "$TMP/seccomp/memvisor-batch.json" 'd["listenerMetadata"]' | grep -qx "memvisor.policy=batch"
	[ "$(ls "$TMP/seccomp")" = "$(printf '%s\n' memvisor-batch.json memvisor.json)" ]
	[ "$(id -u)" = 0 ] || skip "the agent needs root"
	mapfile -t agent < <(node_cmd agent)
	"${agent[@]}" --listen "$TMP/seccomp.sock" --socket "$TMP/agent.sock" 2>"$TMP/agent.err" &
	AGENT=$!
	wait_for 5 test -S "$TMP/agent.sock"
	mapfile -t probe < <(node_cmd probe)
	run "${probe[@]}"
	echo "$output"
	assert_success
	assert_output --partial "memvisor agent"
	assert_output --partial "named policies:      $TMP/etc/NAME.json"
}
