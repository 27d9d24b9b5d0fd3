#!/usr/bin/env bash
# Run every test tier and print one summary line: "N passed, N failed".
#   tests/run.sh BUILD_DIR [unit|bats|fuzz|all]
# Unit tests, bats and the fuzz harnesses (FUZZ_CHECK_SECONDS each) speak
# TAP; this counts their results. With SANITIZER_REPORTS set (make asan),
# a last line checks that no sanitizer report was written there.
set -u
build=${1:-build}
what=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
export MEMVISOR_BUILD=$(cd "$root/$build" 2>/dev/null && pwd || echo "$root/$build")
export MEMVISOR="$MEMVISOR_BUILD/memvisor"

pass=0 fail=0 skip=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

count() {
	# Read TAP on stdin, echo it, count results.
	while IFS= read -r line; do
		printf '%s\n' "$line"
		case "$line" in
		"not ok "*) fail=$((fail + 1)) ;;
		"ok "*"# skip"* | "ok "*"# SKIP"*) skip=$((skip + 1)) ;;
		"ok "*) pass=$((pass + 1)) ;;
		esac
	done
}

if [ "$what" = all ] || [ "$what" = unit ]; then
	for t in "$MEMVISOR_BUILD"/unit/test_*; do
		[ -x "$t" ] || continue
		echo "# unit: $(basename "$t")"
		count < <("$t" 2>&1; echo "# exit $?")
	done
fi

if [ "$what" = all ] || [ "$what" = bats ]; then
	echo "# bats: tests/bats"
	count < <(bats --tap ${BATS_FILTER:+--filter "$BATS_FILTER"} "$root"/tests/bats/*.bats 2>&1)
fi

if [ "$what" = all ] || [ "$what" = fuzz ]; then
	echo "# fuzz: tests/fuzz, ${FUZZ_CHECK_SECONDS:-30} s each"
	count < <("$root"/tests/fuzz/run.sh "$MEMVISOR_BUILD" "${FUZZ_CHECK_SECONDS:-30}" --tap 2>&1)
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

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
