/* A growable text buffer for writing large JSON documents directly, where
 * building a jansson tree would cost a malloc per value (the regions of a
 * 50,000-region process: 0.7 s as a tree, a few ms as text). */
#ifndef MV_JBUF_H
#define MV_JBUF_H

#include <stddef.h>
#include <stdint.h>

struct jbuf {
	char *s;
	size_t len, cap;
};

void jbuf_init(struct jbuf *b);
void jbuf_free(struct jbuf *b);
/* Take the NUL-terminated text; the buffer is empty afterwards. */
char *jbuf_steal(struct jbuf *b);

void jbuf_raw(struct jbuf *b, const char *s, size_t n);
void jbuf_lit(struct jbuf *b, const char *s); /* a literal C string, unescaped */
void jbuf_printf(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string (quoted and escaped), or null for NULL. */
void jbuf_str(struct jbuf *b, const char *s);
void jbuf_u64(struct jbuf *b, uint64_t v);
/* "0x..." as a JSON string. */
void jbuf_hex(struct jbuf *b, uint64_t v);

#endif
