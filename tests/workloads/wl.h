/* Small pieces the workloads share (tests/workloads/): each workload is a
 * program of its own, built from its one .c file with this header. */
#ifndef MV_WL_H
#define MV_WL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* One formatted answer on stdout, with write(2) (no stdio buffer a fork
 * or an _exit could duplicate or lose); a failed write ends the program
 * with status 4. */
static inline __attribute__((format(printf, 1, 2))) void say(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(b) - 1)
		n = (int)sizeof(b) - 1;
	if (n > 0 && write(1, b, (size_t)n) < 0)
		_exit(4);
}

/* splitmix64's finaliser: a well-mixed 64-bit value of x, the same
 * natively and supervised (deterministic patterns and choices). */
static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
