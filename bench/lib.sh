# bench/lib.sh: what the benchmark scripts share; sourced by them.

# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# bench_images NAME IMG [DIR]: T, a temporary directory; DIR, where
# images go (DIR if given, else $T/images); PIDS, for the script's
# background jobs. At exit descriptors 7 and 8 (the workloads' stdin) are
# closed, the jobs waited for, and T and DIR/IMG removed.
bench_images() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/memvisor-$1.XXXXXX")
	BENCH_IMG=$2
	DIR=${3:-$T/images}
	mkdir -p "$DIR"
	PIDS=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	exec 7>&- 8>&- 2>/dev/null || true
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T" "${DIR:?}/$BENCH_IMG"
}
