#include "common/jsonw.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

static void reserve(struct jw *w, size_t n)
{
	if (w->len + n + 1 <= w->cap)
		return;
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < w->len + n + 1)
		cap *= 2;
	w->buf = xrealloc(w->buf, cap);
	w->cap = cap;
}

static void put(struct jw *w, const char *s, size_t n)
{
	reserve(w, n);
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void putc_(struct jw *w, char c)
{
	reserve(w, 1);
	w->buf[w->len++] = c;
	w->buf[w->len] = '\0';
}

void jw_init(struct jw *w, int pretty_depth)
{
	memset(w, 0, sizeof(*w));
	w->pretty_depth = pretty_depth;
	w->first[0] = true;
}

void jw_free(struct jw *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static void newline(struct jw *w, int depth)
{
	putc_(w, '\n');
	for (int i = 0; i < depth; i++)
		putc_(w, ' ');
}

/* Before a value: the comma and line break its position needs. */
static void sep(struct jw *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!w->first[w->depth])
		putc_(w, ',');
	w->first[w->depth] = false;
	if (w->depth > 0 && w->depth <= w->pretty_depth)
		newline(w, w->depth);
}

static void open_(struct jw *w, char c)
{
	sep(w);
	putc_(w, c);
	if (w->depth + 1 < JW_MAX_DEPTH)
		w->depth++;
	w->first[w->depth] = true;
}

static void close_(struct jw *w, char c)
{
	bool empty = w->first[w->depth];
	if (w->depth > 0)
		w->depth--;
	if (!empty && w->depth + 1 <= w->pretty_depth)
		newline(w, w->depth);
	putc_(w, c);
}

void jw_obj(struct jw *w)
{
	open_(w, '{');
}

void jw_obj_end(struct jw *w)
{
	close_(w, '}');
}

void jw_arr(struct jw *w)
{
	open_(w, '[');
}

void jw_arr_end(struct jw *w)
{
	close_(w, ']');
}

/* Length of the UTF-8 sequence at s (at most n bytes), 0 if invalid
 * (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t len = c >= 0xc2 && c <= 0xdf   ? 2
		     : c >= 0xe0 && c <= 0xef ? 3
		     : c >= 0xf0 && c <= 0xf4 ? 4
					      : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (c == 0xe0 && s[1] < 0xa0)
		return 0;
	if (c == 0xed && s[1] > 0x9f)
		return 0;
	if (c == 0xf0 && s[1] < 0x90)
		return 0;
	if (c == 0xf4 && s[1] > 0x8f)
		return 0;
	return len;
}

size_t jw_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t l = utf8_seq(s + i, n - i);
		if (!l)
			break;
		i += l;
	}
	return i;
}

static void put_string(struct jw *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	putc_(w, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(w, esc, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(w, esc, 6);
			i++;
		} else if (c < 0x80) {
			putc_(w, (char)c);
			i++;
		} else {
			size_t l = utf8_seq(s + i, n - i);
			if (l) {
				put(w, str + i, l);
				i += l;
			} else {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				put(w, esc, 6);
				i++;
			}
		}
	}
	putc_(w, '"');
}

void jw_key(struct jw *w, const char *key)
{
	sep(w);
	put_string(w, key, strlen(key));
	putc_(w, ':');
	w->after_key = true;
}

void jw_strn(struct jw *w, const char *s, size_t n)
{
	sep(w);
	put_string(w, s, n);
}

void jw_str(struct jw *w, const char *s)
{
	if (!s) {
		jw_null(w);
		return;
	}
	jw_strn(w, s, strlen(s));
}

/* Integers are most of a manifest: format them without printf. */
static void put_u64(struct jw *w, uint64_t v)
{
	char tmp[24];
	int i = (int)sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(w, tmp + i, sizeof(tmp) - (size_t)i);
}

void jw_u64(struct jw *w, uint64_t v)
{
	sep(w);
	put_u64(w, v);
}

void jw_i64(struct jw *w, int64_t v)
{
	sep(w);
	if (v < 0) {
		putc_(w, '-');
		put_u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(w, (uint64_t)v);
	}
}

void jw_hex(struct jw *w, uint64_t v)
{
	char tmp[24];
	sep(w);
	int n = snprintf(tmp, sizeof(tmp), "\"0x%llx\"", (unsigned long long)v);
	put(w, tmp, (size_t)n);
}

void jw_bool(struct jw *w, bool v)
{
	sep(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(struct jw *w)
{
	sep(w);
	put(w, "null", 4);
}

void jw_f64(struct jw *w, double v)
{
	char tmp[40];
	sep(w);
	int n = snprintf(tmp, sizeof(tmp), "%.9g", v);
	if (!strpbrk(tmp, ".eEn"))
		tmp[n++] = '.', tmp[n++] = '0', tmp[n] = '\0';
	put(w, tmp, (size_t)n);
}

void jw_newline(struct jw *w)
{
	putc_(w, '\n');
}

void jw_kstr(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

void jw_ku64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_u64(w, v);
}

void jw_ki64(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_i64(w, v);
}

void jw_khex(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_hex(w, v);
}

void jw_kbool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	jw_bool(w, v);
}
