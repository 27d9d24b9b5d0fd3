#!/usr/bin/env bash
# Shell workload for bench/run.sh: what build scripts do, a process per
# line. Every iteration forks subshells and execs tr and wc through pipes,
# so the cost is fork, exec and the dynamic loader's mmaps.
n=${1:-100}
s=0
for ((i = 0; i < n; i++)); do
	x=$(echo "$i" | tr 0-9 a-j)
	y=$( (echo "$x"; echo b) | wc -l)
	s=$((s + y + ${#x}))
done
echo "$s"
