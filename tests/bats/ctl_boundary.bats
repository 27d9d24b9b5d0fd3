#!/usr/bin/env bats
# The control socket's boundaries (docs/protocol.md, "Who may connect and
# do what"; issue 12): a supervised program cannot steer its supervisor,
# another user cannot plant the runtime directory, files memvisor creates
# cannot be redirected by a symlink, a FIFO cannot block the main loop,
# and what memvisor keeps for jobs and clients is bounded.

load helpers
bats_require_minimum_version 1.5.0

ctl() { "$MEMVISOR" ctl --socket "$SOCK" "$@"; }
raw() { python3 "$BATS_TEST_DIRNAME/ctlraw.py" "$SOCK" "$@"; }

teardown() {
	[ -n "${TMP:-}" ] && touch "$TMP/go" && sleep 0.2
	exec 7>&- 2>/dev/null || true
	teardown_tmp
}

@test "a supervised program cannot change its own policy over the socket, nor query it" {
	printf '{"version": 1, "limits": {"max_mapping": "64M"}}\n' >"$TMP/quota.json"
	printf '{"version": 1}\n' >"$TMP/open.json"
	# The command, and an orphan it leaves behind (reparented to the
	# reaper, still supervised), each try to lift the quota; then the
	# command waits for $TMP/go.
	"$MEMVISOR" run --socket "$SOCK" --policy "$TMP/quota.json" -- sh -c '
		"$MEMVISOR" ctl --socket "$0" policy set "$1/open.json" >"$1/direct" 2>&1; echo "rc $?" >>"$1/direct"
		( setsid sh -c "\"\$MEMVISOR\" ctl --socket \"$0\" policy set \"$1/open.json\" >\"$1/orphan\" 2>&1; echo rc \$? >>\"$1/orphan\"" & )
		python3 "$2" "$0" send "{\"id\":1,\"cmd\":\"status\"}" >"$1/raw" 2>&1
		while [ ! -e "$1/go" ]; do sleep 0.05; done' "$SOCK" "$TMP" "$BATS_TEST_DIRNAME/ctlraw.py" &
	mv=$!
	remember_pid $mv
	wait_for 10 test -s "$TMP/raw"
	wait_for 10 grep -q '^rc' "$TMP/orphan"
	cat "$TMP/direct" "$TMP/orphan" "$TMP/raw"
	grep -q 'forbidden: requests from a supervised process are refused' "$TMP/direct"
	grep -q '^rc 1$' "$TMP/direct"
	grep -q 'forbidden' "$TMP/orphan"
	grep -q '^rc 1$' "$TMP/orphan"
	grep -q '"code":"forbidden"' "$TMP/raw"
	# From outside the tree, the same socket answers, and the quota holds.
	run ctl --json policy
	assert_success
	echo "$output" >"$TMP/show.json"
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["source"]')" = "$TMP/quota.json" ]
	[ "$(json_get "$TMP/show.json" 'd.get("result", d)["policy"]["limits"]["max_mapping"]')" -eq $((64 << 20)) ]
	touch "$TMP/go"
	wait $mv
}
