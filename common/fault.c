#include "common/fault.h"
#include "common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_POINTS 16

static struct point {
	char name[48];
	long target;
	atomic_long calls;
} points[MAX_POINTS];
static int npoints;
static bool enabled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void parse(void)
{
	const char *env = getenv("MEMVISOR_FAULT");
	if (!env || !*env)
		return;
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", env);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok && npoints < MAX_POINTS;
	     tok = strtok_r(NULL, ",", &save)) {
		struct point *p = &points[npoints];
		char *colon = strchr(tok, ':');
		p->target = 1;
		if (colon) {
			*colon = '\0';
			p->target = atol(colon + 1);
			if (p->target < 1)
				p->target = 1;
		}
		snprintf(p->name, sizeof(p->name), "%s", tok);
		atomic_init(&p->calls, 0);
		npoints++;
	}
	enabled = npoints > 0;
}

void fault_init(void)
{
	pthread_once(&once, parse);
}

bool fault_hit(const char *name)
{
	fault_init();
	if (__builtin_expect(!enabled, 1))
		return false;
	for (int i = 0; i < npoints; i++) {
		if (strcmp(points[i].name, name) != 0)
			continue;
		long n = atomic_fetch_add(&points[i].calls, 1) + 1;
		if (n == points[i].target) {
			fprintf(stderr, "memvisor: fault injected at %s (call %ld)\n", name, n);
			return true;
		}
	}
	return false;
}
