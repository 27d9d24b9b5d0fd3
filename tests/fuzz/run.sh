#!/usr/bin/env bash
# Run every fuzz harness for a set time, one after the other, then every
# saved regression input once.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [--tap]
# BUILD_DIR/fuzz holds the harnesses (make fuzz-build). Each runs on a copy
# of its seed corpus in BUILD_DIR/fuzz/corpus/TARGET (new inputs go there,
# never into tests/fuzz); a crash is saved in BUILD_DIR/fuzz/crashes/TARGET/.
# Prints one line per target, as TAP with --tap (for tests/run.sh).
set -u
build=${1:?usage: run.sh BUILD_DIR SECONDS [--tap]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [--tap]}
tap=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
out="$build/fuzz"
n=0 failed=0

result() { # ok|not ok, text
	n=$((n + 1))
	if [ -n "$tap" ]; then
		echo "$1 $n $2"
	else
		printf '%-7s %s\n' "$([ "$1" = ok ] && echo PASS || echo FAIL)" "$2"
	fi
	[ "$1" = ok ] || failed=1
}

targets=$(cd "$here" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
if [ ! -x "$out/fuzz_ctl" ]; then
	for t in $targets; do
		result ok "fuzz $t # skip no libFuzzer harnesses: clang with its fuzzer runtime (libclang-rt-14-dev) is not installed"
	done
	exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

fuzz_one() { # target
	local t=$1 corpus="$out/corpus/$1" crashes="$out/crashes/$1" log="$out/logs/$1.log"
	mkdir -p "$corpus" "$crashes" "$out/logs"
	cp -n "$here/corpus/$t/"* "$corpus/" 2>/dev/null
	"$out/fuzz_$t" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
	local rc=$? execs
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ "$rc" -eq 0 ]; then
		result ok "fuzz $t: ${execs:-?} execs in ${seconds}s, corpus $(ls "$corpus" | wc -l)"
	else
		local crash
		crash=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
		result "not ok" "fuzz $t: exit $rc after ${execs:-?} execs: ${crash:-see $log}"
		[ -n "$tap" ] && grep -m 12 -E 'ERROR|SUMMARY|#[0-9]+ 0x' "$log" | sed 's/^/# /'
	fi
}

regress_one() { # target
	local t=$1 dir="$here/regress/$1" log="$out/logs/$1.regress.log"
	local inputs=("$dir"/*)
	if [ ! -e "${inputs[0]}" ]; then
		result ok "fuzz $t regressions: none saved"
		return 0
	fi
	if "$out/fuzz_$t" "${inputs[@]}" >"$log" 2>&1; then
		result ok "fuzz $t regressions: ${#inputs[@]} inputs"
	else
		result "not ok" "fuzz $t regressions: $(grep 'Running: ' "$log" | tail -1) (see $log)"
	fi
}

for t in $targets; do
	fuzz_one "$t"
done
for t in $targets; do
	regress_one "$t"
done
exit $failed
