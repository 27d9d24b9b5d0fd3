#!/usr/bin/env bash
# Churn program: make -j2 compiling generated C files, then the result.
#   make_project.sh gen DIR [N]     write N (default 36) small C files, a
#                                   main.c and a Makefile into DIR
#   make_project.sh build DIR [K]   K times (default 2): make clean, make
#                                   -j2, run the program (its output is
#                                   the sum of what every file computes)
set -eu
what=$1 dir=$2

gen() {
	local n=${1:-36} i
	mkdir -p "$dir"
	for ((i = 0; i < n; i++)); do
		cat >"$dir/f$i.c" <<EOF
#include <stdint.h>
#include <string.h>
static uint32_t table[1024];
static const char name[] = "f$i: generated for the churn tier";
uint64_t f$i(uint64_t x);
uint64_t f$i(uint64_t x)
{
	uint64_t h = 1469598103934665603ull ^ $i;
	for (int k = 0; k < 1024; k++)
		table[k] = (uint32_t)(x * 2654435761u + (uint64_t)k * $((i * 7 + 3)));
	for (int round = 0; round < $((i % 5 + 3)); round++)
		for (int k = 0; k < 1024; k++) {
			h ^= table[(k * $((i + 1))) & 1023];
			h *= 1099511628211ull;
			table[k] ^= (uint32_t)(h >> 17);
		}
	return h + strlen(name);
}
EOF
	done
	{
		echo '#include <stdint.h>'
		echo '#include <stdio.h>'
		for ((i = 0; i < n; i++)); do echo "uint64_t f$i(uint64_t x);"; done
		echo 'int main(void)'
		echo '{'
		echo '	uint64_t sum = 0;'
		for ((i = 0; i < n; i++)); do
			echo "	sum = sum * 31 + f$i(sum + $i);"
			[ $((i % 8)) -ne 7 ] || echo "	printf(\"after f$i: %016llx\\n\", (unsigned long long)sum);"
		done
		echo '	printf("total %016llx\n", (unsigned long long)sum);'
		echo '	return 0;'
		echo '}'
	} >"$dir/main.c"
	{
		echo "OBJ := main.o $(for ((i = 0; i < n; i++)); do printf 'f%d.o ' $i; done)"
		echo 'CFLAGS := -O2 -Wall'
		echo 'prog: $(OBJ)'
		printf '\t$(CC) $(CFLAGS) -o $@ $(OBJ)\n'
		echo '%.o: %.c'
		printf '\t$(CC) $(CFLAGS) -c -o $@ $<\n'
		echo 'clean:'
		printf '\trm -f prog *.o\n'
	} >"$dir/Makefile"
}

build() {
	local k=${1:-2} i
	for ((i = 1; i <= k; i++)); do
		make -s -C "$dir" clean
		make -s -j2 -C "$dir" prog
		"$dir/prog"
	done
}

case $what in
gen) gen "${3:-36}" ;;
build) build "${3:-2}" ;;
*)
	echo "usage: make_project.sh gen|build DIR [N]" >&2
	exit 2
	;;
esac
