#!/usr/bin/env bash
# Churn program: bash with arrays and associative arrays held across
# rounds, command substitutions, subshells, pipes and background jobs.
#   shell.sh [ROUNDS] [N]
# Prints one line of checksums per round; the output depends only on the
# arguments.
set -u
rounds=${1:-20}
n=${2:-6000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -a keep
declare -A seen
for ((i = 0; i < n; i++)); do
	keep[i]=$(((i * 2654435761 + 12345) % 1000003))
	seen["k$i"]=${keep[i]}
done
keep_sum=$(printf '%s\n' "${keep[@]}" | cksum)

for ((r = 1; r <= rounds; r++)); do
	arr=()
	for ((i = 0; i < n; i++)); do
		arr+=($(((i * r * 40503 + r) % 65521)))
	done
	str=""
	for ((i = 0; i < n; i += 3)); do str+="${arr[i]}:"; done
	# Background jobs: a pipeline and a subshell, each to a file.
	printf '%s\n' "${arr[@]}" | sort -n | uniq -c | md5sum | cut -c1-16 >"$tmp/sorted.$r" &
	(
		s=0
		for v in "${arr[@]}"; do s=$(((s * 31 + v) % 1000000007)); done
		echo "$s" >"$tmp/sub.$r"
	) &
	{ printf '%s' "$str" | tr ':' '\n' | awk '{ s += $1 } END { print s }' >"$tmp/awk.$r"; } &
	sleep 0.0$((r % 5))
	hex=$(for ((i = 0; i < 200; i++)); do printf '%04x' "${arr[i * 7 % n]}"; done | md5sum | cut -c1-16)
	wait
	look=0
	for ((i = r; i < n; i += 97)); do look=$((look + ${seen["k$i"]})); done
	now=$(printf '%s\n' "${keep[@]}" | cksum)
	[ "$now" = "$keep_sum" ] && kept=same || kept="CHANGED $now"
	echo "round $r: ${#arr[@]} $(cat "$tmp/sorted.$r") $(cat "$tmp/sub.$r") $(cat "$tmp/awk.$r") $hex ${#str} $look keep $kept"
done
echo done
