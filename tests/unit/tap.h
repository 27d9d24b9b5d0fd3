/* A minimal TAP producer for the C unit tests: each check prints one
 * "ok N - what" or "not ok N - what" line; tap_done() prints the plan and
 * returns the exit status. */
#ifndef MV_TAP_H
#define MV_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		tap_n++;                                                                           \
		int _c = !!(cond);                                                                 \
		if (!_c)                                                                           \
			tap_failed++;                                                              \
		printf("%sok %d - ", _c ? "" : "not ", tap_n);                                     \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!_c)                                                                           \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
	} while (0)

#define is_u64(got, want, ...)                                                                     \
	do {                                                                                       \
		unsigned long long _g = (got), _w = (want);                                        \
		ok(_g == _w, __VA_ARGS__);                                                         \
		if (_g != _w)                                                                      \
			printf("#   got %llu, want %llu\n", _g, _w);                                   \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
