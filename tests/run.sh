#!/usr/bin/env bash
# Run every test tier and print one summary line: "N passed, N failed".
#   tests/run.sh BUILD_DIR [unit|bats|fuzz|unpriv|all]
# Unit tests, bats and the fuzz harnesses (FUZZ_CHECK_SECONDS each) speak
# TAP; this counts their results. With SANITIZER_REPORTS set (make asan),
# a last line checks that no sanitizer report was written there.
# BATS_FILTER selects tests by name, BATS_FILES="storm faults" by file;
# BATS_OPTS is passed to bats (make soak shows the figures tests print).
# BATS_SHARDS=1 runs the bats files in one bats process; by default two
# run side by side (shard_files), unless BATS_FILES names the files.
# The bats tests are timed (--timing); the ten slowest are listed before
# the summary line, which stays the last.
# unpriv (part of all when run as root): the basic-supervision bats files
# again as nobody, from a copy of the tree that user can read; their TAP
# names start with "unpriv:".
set -u
build=${1:-build}
what=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
export MEMVISOR_BUILD=$(cd "$root/$build" 2>/dev/null && pwd || echo "$root/$build")
export MEMVISOR="$MEMVISOR_BUILD/memvisor"

pass=0 fail=0 skip=0
start=$SECONDS
tier() {
	# The time each tier took, printed after it.
	echo "# $1 took $((SECONDS - tier_start)) s"
	tier_start=$SECONDS
}
tier_start=$SECONDS
log=$(mktemp)
times=$(mktemp)
pybin=$(mktemp -d)
trap 'rm -rf "$log" "$times" "$pybin"' EXIT

# The tests start python3 thousands of times. Where python3 is a version
# manager's shim (pyenv's is a bash script: 0.3-0.5 s a start on a busy
# 2-core machine, against 0.05-0.08 for the interpreter), the interpreter
# it runs goes first on PATH: the same Python, without the shim.
if py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ] &&
	[ "$(command -v python3)" != "$py" ]; then
	ln -s "$py" "$pybin/python3"
	export PATH="$pybin:$PATH"
fi

count() {
	# Read TAP on stdin, echo it, count results.
	while IFS= read -r line; do
		printf '%s\n' "$line"
		case "$line" in
		"not ok "*) fail=$((fail + 1)) ;;
		"ok "*"# skip"* | "ok "*"# SKIP"*) skip=$((skip + 1)) ;;
		"ok "*) pass=$((pass + 1)) ;;
		esac
		case "$line" in
		*" in "*ms) printf '%s\n' "$line" >>"$times" ;;
		esac
	done
}

if [ "$what" = all ] || [ "$what" = unit ]; then
	for t in "$MEMVISOR_BUILD"/unit/test_*; do
		[ -x "$t" ] || continue
		echo "# unit: $(basename "$t")"
		count < <("$t" 2>&1; echo "# exit $?")
	done
	tier unit
fi

# The files whose tests must pass without privilege.
UNPRIV_FILES="run ctl policy policy_bad policy_ctl policy_wx bypass rollback"

unpriv_tap() {
	local u=65534 dir
	dir=$(mktemp -d)
	mkdir -p "$dir/tree/build" "$dir/tree/policy" "$dir/home" "$dir/tmp"
	cp -r "$root/tests" "$dir/tree/"
	cp -r "$root/policy/examples" "$dir/tree/policy/"
	cp -r "$MEMVISOR" "$MEMVISOR_BUILD/workloads" "$dir/tree/build/"
	chmod -R a+rX "$dir"
	chmod 755 "$dir"
	chown -R "$u:$u" "$dir/home" "$dir/tmp"
	local files=()
	for f in $UNPRIV_FILES; do files+=("$dir/tree/tests/bats/$f.bats"); done
	echo "# bats as uid $u: $UNPRIV_FILES"
	(cd "$dir/home" && setpriv --reuid=$u --regid=$u --clear-groups -- \
		env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME="$dir/home" TMPDIR="$dir/tmp" XDG_RUNTIME_DIR="$dir/home" \
		MEMVISOR_BUILD="$dir/tree/build" MEMVISOR="$dir/tree/build/memvisor" \
		bats --tap --timing ${BATS_FILTER:+--filter "$BATS_FILTER"} "${files[@]}" 2>&1 |
		sed -E 's/^(ok|not ok) ([0-9]+) /\1 \2 unpriv: /')
	rm -rf "$dir"
}
unpriv() { count < <(unpriv_tap); }

# The files in two shards of about equal time: the heaviest first, each
# to the lighter shard; the seconds are each file's tests' own times
# (bats --timing) in a clean clone's make check as root with two shards on
# a 2-core machine, 2026-12-07, python3 started without a shim (others
# count 10): update them when a file grows. storm, death, run and
# privilege go together, in the first shard, which the unpriv tier
# follows when UNPRIV_AFTER is set (its run.bats starts sleep processes
# they look for).
declare -A BATS_SECONDS=([churn]=369 [evict_safety]=104 [agent]=101 [checkpoint]=90
	[rollback_until]=84 [live]=73 [faults]=60 [shm_evict]=60 [reload]=48 [rollback]=40
	[run]=37 [ctl_boundary]=28 [ctl]=24 [storm]=22 [kernel_held]=21 [death]=13
	[cli_output]=12 [new_user]=11 [metrics]=10 [cli_options]=10 [install]=9 [policy]=8
	[policy_wx]=7 [policy_ctl]=6 [image_files]=6 [jobs]=5 [bypass]=4 [privilege]=3 [man]=3
	[check]=3 [policy_bad]=2 [contrib]=2)
UNPRIV_SECONDS=104
shard_files() {
	local f b w together=0 weighted=()
	shard=("" "")
	local load=(0 0)
	for f in "$@"; do
		b=$(basename "$f" .bats)
		w=${BATS_SECONDS[$b]:-10}
		case $b in storm | death | run | privilege) together=$((together + w)) ;;
		*) weighted+=("$w $f") ;; esac
	done
	for f in "$@"; do
		case $(basename "$f" .bats) in storm | death | run | privilege) shard[0]+=" $f" ;; esac
	done
	load[0]=$((together + ${UNPRIV_AFTER:+UNPRIV_SECONDS}))
	while read -r w f; do
		[ -n "$f" ] || continue
		if [ "${load[0]}" -le "${load[1]}" ]; then i=0; else i=1; fi
		shard[i]+=" $f"
		load[i]=$((load[i] + w))
	done < <(printf '%s\n' "${weighted[@]}" | sort -rn)
}

if [ "$what" = all ] || [ "$what" = bats ]; then
	echo "# bats: tests/bats"
	files=("$root"/tests/bats/*.bats)
	[ -z "${BATS_FILES:-}" ] || { files=(); for f in $BATS_FILES; do files+=("$root/tests/bats/$f.bats"); done; }
	shards=${BATS_SHARDS:-2}
	[ -z "${BATS_FILES:-}" ] || shards=1
	if [ "$shards" -le 1 ]; then
		count < <(bats --tap --timing ${BATS_OPTS:-} ${BATS_FILTER:+--filter "$BATS_FILTER"} "${files[@]}" 2>&1)
	else
		# Two bats processes side by side, each a share of the files:
		# most tests wait on programs, sockets and disks, not on a CPU.
		# Each test has its own directory and runtime directory
		# (helpers.bash); files whose tests look for processes by name
		# run in one shard (storm, death, run and privilege look for
		# storm and sleep processes).
		# In all, as root, the unpriv tier runs after the first shard.
		[ "$what" = all ] && [ "$(id -u)" = 0 ] && UNPRIV_AFTER=1
		shard_files "${files[@]}"
		for i in 0 1; do
			{
				# shellcheck disable=SC2086
				bats --tap --timing ${BATS_OPTS:-} ${BATS_FILTER:+--filter "$BATS_FILTER"} ${shard[$i]} 2>&1
				if [ "$i" = 0 ] && [ -n "${UNPRIV_AFTER:-}" ]; then
					echo "# unpriv: after shard 1"
					unpriv_tap
				fi
			} >"$log.$i" &
			pids[i]=$!
		done
		for i in 0 1; do
			wait "${pids[i]}"
			echo "# bats shard $((i + 1)) of 2:$(for f in ${shard[$i]}; do printf ' %s' "$(basename "$f" .bats)"; done)"
			count <"$log.$i"
			rm -f "$log.$i"
		done
	fi
	tier bats
fi

if [ -z "${UNPRIV_AFTER:-}" ] && { [ "$what" = unpriv ] || { [ "$what" = all ] && [ "$(id -u)" = 0 ]; }; }; then
	if [ "$(id -u)" = 0 ]; then
		unpriv
		tier unpriv
	else
		echo "# unpriv: skipped, needs root to switch to an unprivileged user"
	fi
fi

if [ "$what" = all ] || [ "$what" = fuzz ]; then
	echo "# fuzz: tests/fuzz, ${FUZZ_CHECK_SECONDS:-6} s each"
	count < <("$root"/tests/fuzz/run.sh "$MEMVISOR_BUILD" "${FUZZ_CHECK_SECONDS:-6}" --tap 2>&1)
	tier fuzz
fi

if [ -n "${SANITIZER_REPORTS:-}" ]; then
	reports=$(ls "$SANITIZER_REPORTS" 2>/dev/null)
	if [ -z "$reports" ]; then
		count <<<"ok - sanitizers: no report in $SANITIZER_REPORTS"
	else
		count < <(echo "not ok - sanitizers: $(echo $reports | wc -w) reports in $SANITIZER_REPORTS: $(echo $reports)"
			  head -n 30 "$SANITIZER_REPORTS"/* | sed 's/^/# /')
	fi
fi

if [ -s "$times" ]; then
	echo "# the ten slowest tests:"
	sed -E 's/^(not )?ok [0-9]+ (.*) in ([0-9]+)ms$/\3 \2/' "$times" | sort -rn | head -10 |
		awk '{ms = $1; $1 = ""; printf "#   %6.1f s%s\n", ms / 1000, $0}'
fi
t=$((SECONDS - start))
echo "# tests took $((t / 60)) min $((t % 60)) s"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
