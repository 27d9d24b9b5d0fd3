/* Evicted shared memory: a shmem object (MAP_SHARED|MAP_ANONYMOUS memory,
 * a memfd) whose pages the image holds, punched out of the object
 * (FALLOC_FL_PUNCH_HOLE) once every mapping of it is registered with the
 * userfaultfd of its process, and put back into the object's page cache
 * with UFFDIO_COPY: by a fault worker of the process that touched a page
 * (through its own mapping), or by the loader (through memvisor's own
 * mapping of the object, registered with a userfaultfd of memvisor's
 * mm). A page in the page cache serves every process that maps it: the
 * kernel maps it on their next touch without asking anyone, so a page is
 * installed once however many processes fault on it. docs/reload.md,
 * "Shared memory", tells why COPY and not CONTINUE.
 *
 * o->mu guards the loaded bits and the counters; never held across I/O
 * or an ioctl. Functions return 0 or -errno. */
#ifndef MV_RELOAD_SHM_H
#define MV_RELOAD_SHM_H

#include "common/err.h"
#include "state/image.h"
#include "supervisor/reload/evict.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evobj;

/* An evicted object for image object k of im (its page checksums
 * loaded), whose file fd (read-write; taken over) lies in the image at
 * dir: maps it into memvisor and registers that mapping with a uffd of
 * memvisor's own. Nothing is dropped yet. */
int evshm_new(const struct img *im, size_t k, int fd, const char *dir, struct evobj **out,
	      struct mv_err *err);

/* Drop the object's pages (FALLOC_FL_PUNCH_HOLE over the whole file):
 * only once the image is durable and every mapping of the object is
 * registered. Its bytes are then owed. */
int evshm_punch(struct evobj *o);

void evshm_get(struct evobj *o);
void evshm_put(struct evobj *o);

/* Is o the file (dev, ino) (dev as makedev)? */
bool evshm_is(const struct evobj *o, uint64_t dev, uint64_t ino);
const char *evshm_id(const struct evobj *o);
const char *evshm_path(const struct evobj *o);

/* Bytes owed by the object, and loaded back so far; bytes it held when
 * evicted. */
void evshm_counts(struct evobj *o, uint64_t *owed, uint64_t *loaded);
uint64_t evshm_bytes(const struct evobj *o);

/* Where a fault at object page pg should be served from:
 *   > 0   pages [*a, *b) of the window around pg (within pg's extent and
 *         [lo, hi)) are owed: read them (evshm_read), then install;
 *   0     pg is not owed (a hole of the image, or loaded already): a
 *         zero page (which fails with EEXIST, and wakes, if the page is
 *         in the page cache now). */
int evshm_window(struct evobj *o, uint64_t pg, uint64_t lo, uint64_t hi, uint64_t *a, uint64_t *b);

/* Read object pages [a, b) from the image into buf (page a at buf) and
 * check each against its checksum: ok[i] for page a+i. 0, or the error of
 * the first bad page (-EBADMSG, -EIO). */
int evshm_read(struct evobj *o, uint64_t a, uint64_t b, void *buf, bool *ok);

/* Install the good and still owed pages of [a, b) (in buf, ok) at dst
 * (the address of page a) through uffd, a userfaultfd whose registered
 * range holds dst: UFFDIO_COPY puts each into the page cache and the
 * mapping at once; a page some other copy put there first (EEXIST) is
 * left as it is. -EAGAIN, -ENOENT, -ESRCH as UFFDIO_COPY. */
int evshm_install(struct evobj *o, int uffd, uint64_t dst, uint64_t a, uint64_t b, const void *buf,
		  const bool *ok);

/* Load every owed page through memvisor's own mapping, extent by extent,
 * paced and reported through ops (evict.h). 0 once nothing is owed;
 * -EBADMSG or -EIO: pages the image cannot give back stay owed (a fault
 * on one makes it unservable). */
int evshm_load_all(struct evobj *o, const struct evict_load_ops *ops, void *arg);

/* Nothing is owed: drop memvisor's mapping, its uffd and the fd. */
void evshm_finish(struct evobj *o);

#endif
