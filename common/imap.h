/* A map from non-negative int keys (pids, tids) to pointers: open
 * addressing with linear probing and backward-shift deletion, so lookups
 * stay short under churn. Not thread-safe. */
#ifndef MV_IMAP_H
#define MV_IMAP_H

#include <stddef.h>

struct imap_slot {
	int key; /* -1 = empty */
	void *val;
};

struct imap {
	struct imap_slot *slots;
	size_t cap; /* power of two */
	size_t len;
};

void imap_init(struct imap *m);
void imap_free(struct imap *m);
void *imap_get(const struct imap *m, int key);
/* Insert or replace. */
void imap_put(struct imap *m, int key, void *val);
/* Remove; returns the old value or NULL. */
void *imap_del(struct imap *m, int key);

/* Iterate: for (size_t i = 0; imap_next(m, &i, &k, &v);) */
int imap_next(const struct imap *m, size_t *iter, int *key, void **val);

#endif
