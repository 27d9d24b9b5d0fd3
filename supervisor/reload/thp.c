/* Transparent huge pages across evict and reload (supervisor/reload/thp.h). */
#include "supervisor/reload/thp.h"
#include "common/compat.h"
#include "common/log.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/uffd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define HUGE (2ull << 20)

int evict_thp_note(struct evict_thp *t, pid_t pid, const struct as_range *where, size_t n)
{
	if (!n)
		return 0;
	struct pagemap pm;
	int rc = pagemap_open(pid, true, &pm);
	if (rc < 0)
		return rc;
	size_t before = t->n;
	/* The fallback reader knows no PAGE_IS_HUGE: it reports nothing. */
	for (size_t i = 0; pm.scan && rc == 0 && i < n; i++)
		rc = pagemap_runs(&pm, where[i].start, where[i].end, PAGE_IS_HUGE, 0, &t->v, &t->n,
				  &t->cap);
	pagemap_close(&pm);
	for (size_t i = before; i < t->n; i++) {
		/* A huge page maps a whole aligned 2 MiB: round inwards
		 * anyway, collapse refuses a partial one. */
		t->v[i].start = (t->v[i].start + HUGE - 1) & ~(HUGE - 1);
		t->v[i].end &= ~(HUGE - 1);
		if (t->v[i].end > t->v[i].start)
			t->bytes += t->v[i].end - t->v[i].start;
	}
	return rc;
}

void evict_thp_forget(struct evict_thp *t, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].start < end && start < t->v[i].end)
			t->v[i].end = t->v[i].start;
}

/* MADV_COLLAPSE of one run; the bytes collapsed. */
static uint64_t collapse(int pidfd, const struct as_range *r)
{
	struct iovec iov = {(void *)(uintptr_t)r->start, r->end - r->start};
	long n = syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_COLLAPSE, 0);
	if (n < 0) {
		log_debug("reload: MADV_COLLAPSE of %#llx-%#llx: %s", (unsigned long long)r->start,
			  (unsigned long long)r->end, strerror(errno));
		return 0;
	}
	return (uint64_t)n;
}

void evict_thp_restore(struct evict_thp *t, int pidfd, int uffd)
{
	for (size_t i = 0; i < t->n && pidfd >= 0; i++) {
		const struct as_range *r = &t->v[i];
		if (r->end <= r->start)
			continue;
		/* Registered, pages the image did not hold would count as
		 * missing and refuse the collapse (khugepaged's
		 * userfaultfd_armed check); everything owed is loaded. */
		int rc = uffd_unregister(uffd, r->start, r->end - r->start);
		if (rc < 0 && rc != -ENOMEM && rc != -EINVAL)
			log_debug("reload: unregistering %#llx-%#llx: %s",
				  (unsigned long long)r->start, (unsigned long long)r->end,
				  strerror(-rc));
		t->restored += collapse(pidfd, r);
	}
}

void evict_thp_free(struct evict_thp *t)
{
	free(t->v);
	*t = (struct evict_thp){0};
}
