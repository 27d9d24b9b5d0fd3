#include "common/jbuf.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void jbuf_init(struct jbuf *b)
{
	b->cap = 4096;
	b->len = 0;
	b->s = xmalloc(b->cap);
	b->s[0] = '\0';
}

void jbuf_free(struct jbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

char *jbuf_steal(struct jbuf *b)
{
	char *s = b->s;
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

static void reserve(struct jbuf *b, size_t n)
{
	if (b->len + n + 1 <= b->cap)
		return;
	while (b->len + n + 1 > b->cap)
		b->cap *= 2;
	b->s = xrealloc(b->s, b->cap);
}

void jbuf_raw(struct jbuf *b, const char *s, size_t n)
{
	reserve(b, n);
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void jbuf_lit(struct jbuf *b, const char *s)
{
	jbuf_raw(b, s, strlen(s));
}

void jbuf_printf(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->len) {
		reserve(b, (size_t)n);
		va_start(ap, fmt);
		vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void jbuf_str(struct jbuf *b, const char *s)
{
	if (!s) {
		jbuf_raw(b, "null", 4);
		return;
	}
	reserve(b, strlen(s) * 6 + 2);
	char *o = b->s + b->len;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			*o++ = '\\';
			*o++ = '"';
			break;
		case '\\':
			*o++ = '\\';
			*o++ = '\\';
			break;
		case '\n':
			*o++ = '\\';
			*o++ = 'n';
			break;
		case '\t':
			*o++ = '\\';
			*o++ = 't';
			break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				o += sprintf(o, "\\u%04x", *p);
			} else if (*p >= 0x80) {
				/* Paths are bytes: emit invalid UTF-8 as U+FFFD so the
				 * document stays valid JSON. */
				size_t len = 0;
				if ((*p & 0xe0) == 0xc0)
					len = 2;
				else if ((*p & 0xf0) == 0xe0)
					len = 3;
				else if ((*p & 0xf8) == 0xf0)
					len = 4;
				size_t ok = len;
				for (size_t k = 1; k < len; k++)
					if ((p[k] & 0xc0) != 0x80)
						ok = 0;
				if (ok) {
					memcpy(o, p, len);
					o += len;
					p += len - 1;
				} else {
					memcpy(o, "\\ufffd", 6);
					o += 6;
				}
			} else {
				*o++ = (char)*p;
			}
		}
	}
	*o++ = '"';
	b->len = (size_t)(o - b->s);
	b->s[b->len] = '\0';
}

void jbuf_u64(struct jbuf *b, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
	jbuf_raw(b, tmp, (size_t)n);
}

void jbuf_hex(struct jbuf *b, uint64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "\"0x%llx\"", (unsigned long long)v);
	jbuf_raw(b, tmp, (size_t)n);
}
