#include "policy/jpos.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

/* Deeper nesting than this is no policy; stop rather than recurse. */
#define JPOS_MAX_DEPTH 128

struct scan {
	const char *s;
	size_t len, i;
	int line, col;
	struct jpos *out;
};

static int peek(struct scan *x)
{
	return x->i < x->len ? (unsigned char)x->s[x->i] : -1;
}

/* Step over one byte; at the end of the text (a truncated value, whose
 * closing bracket the callers step over unseen) stay there. */
static void advance(struct scan *x)
{
	if (x->i >= x->len)
		return;
	unsigned char ch = (unsigned char)x->s[x->i++];
	if (ch == '\n') {
		x->line++;
		x->col = 1;
	} else if ((ch & 0xc0) != 0x80) {
		/* UTF-8 continuation bytes do not start a new character. */
		x->col++;
	}
}

static void skip_ws(struct scan *x)
{
	int ch;
	while ((ch = peek(x)) == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
		advance(x);
}

static void record(struct scan *x, char *ptr, int line, int col, int kline, int kcol)
{
	struct jpos *p = x->out;
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 32;
		p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	p->v[p->n++] = (struct jpos_entry){ptr, line, col, kline, kcol};
}

static void put_utf8(char **buf, size_t *n, size_t *cap, unsigned cp)
{
	char tmp[4];
	size_t k;
	if (cp < 0x80) {
		tmp[0] = (char)cp;
		k = 1;
	} else if (cp < 0x800) {
		tmp[0] = (char)(0xc0 | cp >> 6);
		tmp[1] = (char)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		tmp[0] = (char)(0xe0 | cp >> 12);
		tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[2] = (char)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		tmp[0] = (char)(0xf0 | cp >> 18);
		tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[3] = (char)(0x80 | (cp & 0x3f));
		k = 4;
	}
	if (*n + k + 1 > *cap) {
		*cap = (*n + k + 1) * 2;
		*buf = xrealloc(*buf, *cap);
	}
	memcpy(*buf + *n, tmp, k);
	*n += k;
}

static int hex4(struct scan *x, unsigned *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		int ch = peek(x);
		int d = ch >= '0' && ch <= '9'	 ? ch - '0'
			: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
						 : -1;
		if (d < 0)
			return -EINVAL;
		*v = *v << 4 | (unsigned)d;
		advance(x);
	}
	return 0;
}

static int escape(struct scan *x, char **buf, size_t *n, size_t *cap)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	int ch = peek(x);
	const char *e = ch > 0 ? strchr(from, ch) : NULL;
	if (e) {
		advance(x);
		put_utf8(buf, n, cap, (unsigned char)to[e - from]);
		return 0;
	}
	if (ch != 'u')
		return -EINVAL;
	advance(x);
	unsigned cp, lo;
	if (hex4(x, &cp) < 0)
		return -EINVAL;
	/* A surrogate pair is one character. */
	if (cp >= 0xd800 && cp < 0xdc00 && peek(x) == '\\') {
		advance(x);
		if (peek(x) != 'u')
			return -EINVAL;
		advance(x);
		if (hex4(x, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
			return -EINVAL;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	put_utf8(buf, n, cap, cp);
	return 0;
}

/* A string at x (on its opening quote); *out gets its decoded text. */
static int string(struct scan *x, char **out)
{
	size_t n = 0, cap = 16;
	char *buf = xmalloc(cap);
	advance(x);
	for (;;) {
		int ch = peek(x);
		if (ch < 0 || ch < 0x20) {
			free(buf);
			return -EINVAL;
		}
		if (ch == '"') {
			advance(x);
			break;
		}
		if (ch == '\\') {
			advance(x);
			if (escape(x, &buf, &n, &cap) < 0) {
				free(buf);
				return -EINVAL;
			}
			continue;
		}
		if (n + 2 > cap)
			buf = xrealloc(buf, cap *= 2);
		buf[n++] = (char)ch;
		advance(x);
	}
	buf[n] = '\0';
	if (out)
		*out = buf;
	else
		free(buf);
	return 0;
}

static int value(struct scan *x, char *ptr, int kline, int kcol, int depth);

static int members(struct scan *x, const char *ptr, int depth)
{
	advance(x); /* { */
	skip_ws(x);
	if (peek(x) == '}') {
		advance(x);
		return 0;
	}
	for (;;) {
		skip_ws(x);
		if (peek(x) != '"')
			return -EINVAL;
		int kline = x->line, kcol = x->col;
		char *key;
		if (string(x, &key) < 0)
			return -EINVAL;
		char *child = jpos_child(ptr, key);
		free(key);
		skip_ws(x);
		if (peek(x) != ':') {
			free(child);
			return -EINVAL;
		}
		advance(x);
		if (value(x, child, kline, kcol, depth + 1) < 0)
			return -EINVAL;
		skip_ws(x);
		int ch = peek(x);
		advance(x);
		if (ch == '}')
			return 0;
		if (ch != ',')
			return -EINVAL;
	}
}

static int elements(struct scan *x, const char *ptr, int depth)
{
	advance(x); /* [ */
	skip_ws(x);
	if (peek(x) == ']') {
		advance(x);
		return 0;
	}
	for (size_t i = 0;; i++) {
		if (value(x, jpos_index(ptr, i), 0, 0, depth + 1) < 0)
			return -EINVAL;
		skip_ws(x);
		int ch = peek(x);
		advance(x);
		if (ch == ']')
			return 0;
		if (ch != ',')
			return -EINVAL;
	}
}

/* Records ptr (taking ownership) and scans the value. */
static int value(struct scan *x, char *ptr, int kline, int kcol, int depth)
{
	skip_ws(x);
	if (depth > JPOS_MAX_DEPTH || peek(x) < 0) {
		free(ptr);
		return -EINVAL;
	}
	int line = x->line, col = x->col;
	record(x, ptr, line, col, kline ? kline : line, kline ? kcol : col);
	int ch = peek(x);
	if (ch == '{')
		return members(x, ptr, depth);
	if (ch == '[')
		return elements(x, ptr, depth);
	if (ch == '"')
		return string(x, NULL);
	/* Numbers and literals: their exact syntax was jansson's to check. */
	size_t start = x->i;
	while ((ch = peek(x)) >= 0 && (strchr("+-.0123456789eE", ch) || (ch >= 'a' && ch <= 'z')))
		advance(x);
	return x->i > start ? 0 : -EINVAL;
}

int jpos_scan(const char *text, size_t len, struct jpos *out)
{
	struct scan x = {.s = text, .len = len, .line = 1, .col = 1, .out = out};
	/* A UTF-8 byte order mark is not part of the text. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		x.i = 3;
	return value(&x, xstrdup(""), 0, 0, 0);
}

const struct jpos_entry *jpos_find(const struct jpos *p, const char *ptr)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].ptr, ptr) == 0)
			return &p->v[i];
	return NULL;
}

void jpos_free(struct jpos *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].ptr);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

char *jpos_child(const char *parent, const char *token)
{
	size_t n = strlen(parent) + 2;
	for (const char *t = token; *t; t++)
		n += (*t == '~' || *t == '/') ? 2 : 1;
	char *s = xmalloc(n), *o = s;
	o = stpcpy(o, parent);
	*o++ = '/';
	for (const char *t = token; *t; t++) {
		if (*t == '~' || *t == '/') {
			*o++ = '~';
			*o++ = *t == '~' ? '0' : '1';
		} else {
			*o++ = *t;
		}
	}
	*o = '\0';
	return s;
}

char *jpos_index(const char *parent, size_t index)
{
	size_t n = strlen(parent) + 24;
	char *s = xmalloc(n);
	snprintf(s, n, "%s/%zu", parent, index);
	return s;
}
