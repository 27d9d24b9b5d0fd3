/* A streaming JSON writer into a growing buffer: for documents too large
 * to build as jansson trees cheaply (an image manifest lists every extent;
 * jansson takes about 2 us an extent to build and dump, this about 0.1).
 * Commas, nesting and string escaping are handled here; strings that are
 * not valid UTF-8 have each invalid byte written as \u00XX (so the text
 * always loads; such bytes come back as Latin-1 characters). Containers
 * up to pretty_depth deep get one element a line. Cannot fail (allocation
 * failure aborts, like xmalloc). */
#ifndef MV_JSONW_H
#define MV_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JW_MAX_DEPTH 32

struct jw {
	char *buf;
	size_t len, cap;
	int depth;
	int pretty_depth;
	bool first[JW_MAX_DEPTH]; /* no element yet at this depth */
	bool after_key;
};

void jw_init(struct jw *w, int pretty_depth);
void jw_free(struct jw *w);

void jw_obj(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);

void jw_str(struct jw *w, const char *s); /* NULL writes null */
void jw_strn(struct jw *w, const char *s, size_t n);
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);
void jw_hex(struct jw *w, uint64_t v); /* the string "0x..." */
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);
void jw_f64(struct jw *w, double v);

/* End the document with a newline. */
void jw_newline(struct jw *w);

/* Shorthands: a key and its value. */
void jw_kstr(struct jw *w, const char *key, const char *s);
void jw_ku64(struct jw *w, const char *key, uint64_t v);
void jw_ki64(struct jw *w, const char *key, int64_t v);
void jw_khex(struct jw *w, const char *key, uint64_t v);
void jw_kbool(struct jw *w, const char *key, bool v);

/* The length of the longest valid UTF-8 prefix of s[0..n). */
size_t jw_utf8_valid(const unsigned char *s, size_t n);

#endif
