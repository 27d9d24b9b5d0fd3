/* Where each value of a JSON text is: jansson reports positions for syntax
 * errors only, and validation errors need the line and column of the
 * offending value (or of its key). This is a small scanner of its own that
 * walks the text once and records, for every value, its JSON pointer
 * (RFC 6901) and where it and its key start. Lines and columns are
 * 1-based; columns count characters (UTF-8), like jansson's. Pure. */
#ifndef MV_JPOS_H
#define MV_JPOS_H

#include <stddef.h>

struct jpos_entry {
	char *ptr; /* "" for the root, "/rules/0/action" ... */
	int line, col;
	int key_line, key_col; /* the member's key; the value's own position otherwise */
};

struct jpos {
	struct jpos_entry *v;
	size_t n, cap;
};

/* Scan a JSON text. 0, or -EINVAL at the first syntax error (what was
 * recorded until then stays usable). */
int jpos_scan(const char *text, size_t len, struct jpos *out);

/* The entry for a pointer, or NULL. */
const struct jpos_entry *jpos_find(const struct jpos *p, const char *ptr);

void jpos_free(struct jpos *p);

/* parent + "/" + token, with "~" and "/" escaped as RFC 6901 says.
 * Returns a malloc'd string. */
char *jpos_child(const char *parent, const char *token);

/* parent + "/" + index. Returns a malloc'd string. */
char *jpos_index(const char *parent, size_t index);

#endif
