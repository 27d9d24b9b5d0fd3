#include "common/fault.h"
#include "common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_POINTS 16

/* Every point a fault_hit() or FAULT_RETURN() names. A point missing here
 * is refused in MEMVISOR_FAULT, and tests/bats/faults.bats, which runs
 * every listed point, fails for a point named in the sources but not
 * listed (or listed without a scenario). Sorted, one a line. */
/* clang-format off */
static const char *const registry[] = {
    "ckpt_alloc",
    "ckpt_manifest_write",
    "ckpt_pages_open",
    "ckpt_pages_sync",
    "ckpt_pages_write",
    "ckpt_read",
    "ckpt_rename",
    "ckpt_seize",
    "ckpt_stall",
    "container_start_stall",
    "ctl_accept",
    "ctl_alloc",
    "ctl_read",
    "ctl_write",
    "dedup_differs",
    "evict_read",
    "img_read",
    "live_arm_off",
    "live_arm_stall",
    "live_copy_stall",
    "live_no_buffer",
    "notify_recv",
    "notify_send",
    "notify_stall",
    "pidfd_info",
    "pidfd_open",
    "proc_read",
    "procmap_read",
    "ptrace_getregs",
    "ptrace_interrupt",
    "ptrace_setregs",
    "reaper_start_stall",
    "reload_copy_gone",
    "reload_install_none",
    "remote_syscall",
    "serve_zero_stall",
    "shm_punch",
    "statsjson_write",
    "uffd_api",
    "uffd_copy",
    "uffd_register",
    "uffd_writeprotect",
};
/* clang-format on */

static struct point {
	char name[48];
	long target;
	atomic_long calls;
} points[MAX_POINTS];
static int npoints;
static bool enabled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

void fault_list(FILE *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(registry); i++)
		fprintf(out, "%s\n", registry[i]);
}

static bool registered(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(registry); i++)
		if (strcmp(registry[i], name) == 0)
			return true;
	return false;
}

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
		if (!registered(tok)) {
			fprintf(
			    stderr,
			    "memvisor: MEMVISOR_FAULT: unknown point '%s' (see --list-faults)\n",
			    tok);
			continue;
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
