/* idle_threads N MIB: N threads asleep in pause(), MIB MiB of written
 * memory; prints "ready" and waits for stdin to close. For bench/held.sh:
 * what the evict's and --live's look at each thread (supervisor/
 * checkpoint/held.c) costs per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 64;
	char *m = malloc(mib << 20);
	memset(m, 1, mib << 20);
	for (int i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, sleeper, NULL) != 0)
			return 1;
	}
	printf("ready\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	return m[0] == 1 ? 0 : 2;
}
