#include "common/imap.h"
#include "common/util.h"

static size_t slot_of(const struct imap *m, int key)
{
	/* Fibonacci hashing spreads sequential pids over the table. */
	return (size_t)(((uint64_t)(unsigned)key * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

void imap_init(struct imap *m)
{
	m->cap = 64;
	m->len = 0;
	m->slots = xmalloc(m->cap * sizeof(*m->slots));
	for (size_t i = 0; i < m->cap; i++)
		m->slots[i].key = -1;
}

void imap_free(struct imap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}

void *imap_get(const struct imap *m, int key)
{
	for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].val;
		if (m->slots[i].key < 0)
			return NULL;
	}
}

static void grow(struct imap *m)
{
	struct imap old = *m;
	m->cap = old.cap * 2;
	m->len = 0;
	m->slots = xmalloc(m->cap * sizeof(*m->slots));
	for (size_t i = 0; i < m->cap; i++)
		m->slots[i].key = -1;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key >= 0)
			imap_put(m, old.slots[i].key, old.slots[i].val);
	free(old.slots);
}

void imap_put(struct imap *m, int key, void *val)
{
	if ((m->len + 1) * 4 > m->cap * 3)
		grow(m);
	size_t i = slot_of(m, key);
	while (m->slots[i].key >= 0 && m->slots[i].key != key)
		i = (i + 1) & (m->cap - 1);
	if (m->slots[i].key < 0)
		m->len++;
	m->slots[i].key = key;
	m->slots[i].val = val;
}

void *imap_del(struct imap *m, int key)
{
	size_t i = slot_of(m, key);
	while (m->slots[i].key != key) {
		if (m->slots[i].key < 0)
			return NULL;
		i = (i + 1) & (m->cap - 1);
	}
	void *val = m->slots[i].val;
	m->len--;
	/* Backward-shift: pull later members of the probe run into the hole
	 * when their home slot is at or before it (cyclically). */
	size_t hole = i;
	for (size_t j = (i + 1) & (m->cap - 1); m->slots[j].key >= 0; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m, m->slots[j].key);
		if (((j - home) & (m->cap - 1)) >= ((j - hole) & (m->cap - 1))) {
			m->slots[hole] = m->slots[j];
			hole = j;
		}
	}
	m->slots[hole].key = -1;
	m->slots[hole].val = NULL;
	return val;
}

int imap_next(const struct imap *m, size_t *iter, int *key, void **val)
{
	while (*iter < m->cap) {
		size_t i = (*iter)++;
		if (m->slots[i].key >= 0) {
			if (key)
				*key = m->slots[i].key;
			if (val)
				*val = m->slots[i].val;
			return 1;
		}
	}
	return 0;
}
