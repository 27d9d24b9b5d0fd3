/* manifest.json: written with the streaming writer (an image of a sparse
 * gigabyte lists 16,384 extents), read back with jansson, and checked for
 * internal consistency. docs/image-format.md describes every field. */
#include "common/jsonw.h"
#include "common/util.h"
#include "state/image.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- writing ---------------------------------------------------------- */

static void write_prot(struct jw *w, uint8_t prot)
{
	char s[4] = {prot & AS_PROT_READ ? 'r' : '-', prot & AS_PROT_WRITE ? 'w' : '-',
		     prot & AS_PROT_EXEC ? 'x' : '-', '\0'};
	jw_str(w, s);
}

static void write_dev(struct jw *w, uint32_t major, uint32_t minor)
{
	char s[24];
	snprintf(s, sizeof(s), "%02x:%02x", major, minor);
	jw_str(w, s);
}

static void write_extents(struct jw *w, const struct img_extents *x)
{
	jw_key(w, "extents");
	jw_arr(w);
	for (size_t i = 0; i < x->n; i++) {
		jw_arr(w);
		jw_u64(w, x->v[i].addr);
		jw_u64(w, x->v[i].pages);
		jw_u64(w, x->v[i].off);
		jw_u64(w, x->v[i].crc);
		jw_arr_end(w);
	}
	jw_arr_end(w);
}

/* The instruction and stack pointers from a prstatus regset, for people
 * reading the manifest: x86_64 struct user_regs_struct (27 u64, rip the
 * 17th, rsp the 20th) or i386 struct user_regs_struct32 (17 u32, eip the
 * 13th, esp the 16th). */
static void write_ip_sp(struct jw *w, const struct img_regset *r)
{
	uint64_t ip, sp;
	if (r->len == 27 * 8) {
		memcpy(&ip, (const char *)r->data + 16 * 8, 8);
		memcpy(&sp, (const char *)r->data + 19 * 8, 8);
	} else if (r->len == 17 * 4) {
		uint32_t a, b;
		memcpy(&a, (const char *)r->data + 12 * 4, 4);
		memcpy(&b, (const char *)r->data + 15 * 4, 4);
		ip = a;
		sp = b;
	} else {
		return;
	}
	jw_khex(w, "ip", ip);
	jw_khex(w, "sp", sp);
}

static void write_thread(struct jw *w, const struct img_thread *t)
{
	jw_obj(w);
	jw_ki64(w, "tid", t->tid);
	jw_ki64(w, "signal", t->signal);
	jw_kbool(w, "group_stop", t->group_stop);
	jw_kbool(w, "vfork_wait", t->vfork_wait);
	for (size_t i = 0; i < t->n_regs; i++)
		if (strcmp(t->regs[i].name, "prstatus") == 0)
			write_ip_sp(w, &t->regs[i]);
	jw_key(w, "regsets");
	jw_obj(w);
	for (size_t i = 0; i < t->n_regs; i++) {
		_cleanup_free_ char *b = img_b64_encode(t->regs[i].data, t->regs[i].len);
		jw_key(w, t->regs[i].name);
		jw_obj(w);
		jw_ku64(w, "note", t->regs[i].note);
		jw_ku64(w, "size", t->regs[i].len);
		jw_kstr(w, "data", b);
		jw_obj_end(w);
	}
	jw_obj_end(w);
	jw_obj_end(w);
}

static void write_region(struct jw *w, const struct img_region *r)
{
	jw_obj(w);
	jw_khex(w, "start", r->start);
	jw_khex(w, "end", r->end);
	jw_key(w, "prot");
	write_prot(w, r->prot);
	jw_kbool(w, "shared", r->shared);
	jw_kstr(w, "kind", as_kind_name(r->kind));
	jw_kstr(w, "path", r->path);
	jw_ku64(w, "offset", r->offset);
	jw_ku64(w, "inode", r->inode);
	jw_key(w, "dev");
	write_dev(w, r->dev_major, r->dev_minor);
	jw_kstr(w, "content", img_content_name(r->content));
	jw_ku64(w, "committed", r->committed);
	jw_key(w, "object");
	if (r->object >= 0)
		jw_i64(w, r->object);
	else
		jw_null(w);
	write_extents(w, &r->ext);
	jw_obj_end(w);
}

static void write_proc(struct jw *w, const struct img_proc *p)
{
	jw_obj(w);
	jw_ki64(w, "pid", p->pid);
	jw_ki64(w, "ppid", p->ppid);
	jw_kstr(w, "state", p->gone ? "gone" : "dumped");
	jw_kstr(w, "exe", p->exe);
	jw_key(w, "cmdline");
	jw_arr(w);
	for (size_t at = 0; at < p->cmdline_len;) {
		size_t n = strnlen(p->cmdline + at, p->cmdline_len - at);
		jw_strn(w, p->cmdline + at, n);
		at += n + 1;
	}
	jw_arr_end(w);
	jw_ku64(w, "pause_ns", p->pause_ns);
	jw_key(w, "threads");
	jw_arr(w);
	for (size_t i = 0; i < p->n_t; i++)
		write_thread(w, &p->t[i]);
	jw_arr_end(w);
	jw_key(w, "regions");
	jw_arr(w);
	for (size_t i = 0; i < p->n_r; i++)
		write_region(w, &p->r[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

static void write_object(struct jw *w, const struct img_object *o)
{
	jw_obj(w);
	jw_kstr(w, "path", o->path);
	jw_ku64(w, "inode", o->inode);
	jw_key(w, "dev");
	write_dev(w, o->dev_major, o->dev_minor);
	jw_ku64(w, "size", o->size);
	jw_kstr(w, "source", o->source);
	jw_kstr(w, "coverage", img_coverage_name(o->coverage));
	write_extents(w, &o->ext);
	jw_obj_end(w);
}

static void write_totals(struct jw *w, const struct img_totals *t)
{
	jw_key(w, "totals");
	jw_obj(w);
	jw_ku64(w, "processes", t->processes);
	jw_ku64(w, "gone", t->gone);
	jw_ku64(w, "threads", t->threads);
	jw_ku64(w, "regions", t->regions);
	jw_ku64(w, "objects", t->objects);
	jw_ku64(w, "extents", t->extents);
	jw_ku64(w, "data_bytes", t->data_bytes);
	jw_ku64(w, "shared_bytes", t->shared_bytes);
	jw_ku64(w, "committed", t->committed);
	jw_key(w, "by_kind");
	jw_obj(w);
	for (int k = 0; k < AS_KIND_COUNT; k++)
		if (t->by_kind[k])
			jw_ku64(w, as_kind_name((enum as_kind)k), t->by_kind[k]);
	jw_obj_end(w);
	jw_obj_end(w);
}

char *img_manifest_write(const struct img *im, size_t *len)
{
	struct jw w;
	jw_init(&w, 4);
	struct img_totals t;
	img_totals(im, &t);
	char when[64] = "";
	time_t secs = (time_t)(im->created_ns / 1000000000ull);
	struct tm tm;
	if (gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	jw_obj(&w);
	jw_kstr(&w, "format", IMG_FORMAT);
	jw_ku64(&w, "version", im->version);
	jw_kstr(&w, "id", im->id);
	jw_kstr(&w, "memvisor", im->memvisor);
	jw_kstr(&w, "kernel", im->kernel);
	jw_kstr(&w, "arch", im->arch);
	jw_ku64(&w, "page_size", IMG_PAGE);
	jw_ku64(&w, "created_ns", im->created_ns);
	jw_kstr(&w, "created", when);
	jw_kstr(&w, "checksum", "crc32c");
	jw_kstr(&w, "pages_file", IMG_PAGES);
	jw_ku64(&w, "pages_size", im->pages_size);
	if (im->version >= 2)
		jw_ku64(&w, "page_sums_offset", im->sums_off);
	jw_ku64(&w, "pause_ns", im->pause_ns);
	if (im->sup_pid > 0) {
		jw_key(&w, "supervisor");
		jw_obj(&w);
		jw_ku64(&w, "pid", (uint64_t)im->sup_pid);
		if (im->sup_name[0])
			jw_kstr(&w, "name", im->sup_name);
		jw_obj_end(&w);
	}
	write_totals(&w, &t);
	jw_key(&w, "processes");
	jw_arr(&w);
	for (size_t i = 0; i < im->n_p; i++)
		write_proc(&w, &im->p[i]);
	jw_arr_end(&w);
	jw_key(&w, "objects");
	jw_arr(&w);
	for (size_t i = 0; i < im->n_o; i++)
		write_object(&w, &im->o[i]);
	jw_arr_end(&w);
	jw_obj_end(&w);
	jw_newline(&w);
	*len = w.len;
	return w.buf;
}

/* ---- parsing ------------------------------------------------------------ */

struct pctx {
	struct mv_err *err;
	char where[160]; /* the path of the value being read */
};

static int perr(struct pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int perr(struct pctx *c, const char *fmt, ...)
{
	char msg[IMG_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mv_err_set(c->err, 0, NULL, "manifest: %s%s%s", c->where, c->where[0] ? ": " : "", msg);
	return -EINVAL;
}

static int get_u64(struct pctx *c, json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return perr(c, "%s: expected a non-negative integer", key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_i32(struct pctx *c, json_t *o, const char *key, int *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
	    json_integer_value(v) > INT32_MAX)
		return perr(c, "%s: expected an integer", key);
	*out = (int)json_integer_value(v);
	return 0;
}

static int get_hex(struct pctx *c, json_t *o, const char *key, uint64_t *out)
{
	const char *s = json_string_value(json_object_get(o, key));
	char *end;
	if (!s || strncmp(s, "0x", 2) != 0)
		return perr(c, "%s: expected a \"0x...\" string", key);
	errno = 0;
	unsigned long long v = strtoull(s + 2, &end, 16);
	if (errno || end == s + 2 || *end)
		return perr(c, "%s: '%s' is not a hexadecimal address", key, s);
	*out = v;
	return 0;
}

/* An optional string: NULL for null or absent. */
static int get_str_opt(struct pctx *c, json_t *o, const char *key, char **out)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return perr(c, "%s: expected a string or null", key);
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int get_str_buf(struct pctx *c, json_t *o, const char *key, char *buf, size_t len)
{
	const char *s = json_string_value(json_object_get(o, key));
	if (!s)
		return perr(c, "%s: expected a string", key);
	snprintf(buf, len, "%s", s);
	return 0;
}

static int get_array(struct pctx *c, json_t *o, const char *key, json_t **out)
{
	*out = json_object_get(o, key);
	if (!json_is_array(*out))
		return perr(c, "%s: expected an array", key);
	return 0;
}

static int parse_prot(struct pctx *c, json_t *o, uint8_t *prot)
{
	const char *s = json_string_value(json_object_get(o, "prot"));
	if (!s || strlen(s) != 3 || strspn(s, "rwx-") != 3)
		return perr(c, "prot: expected three of r w x -");
	*prot = (s[0] == 'r' ? AS_PROT_READ : 0) | (s[1] == 'w' ? AS_PROT_WRITE : 0) |
		(s[2] == 'x' ? AS_PROT_EXEC : 0);
	return 0;
}

static int parse_dev(struct pctx *c, json_t *o, uint32_t *major, uint32_t *minor)
{
	const char *s = json_string_value(json_object_get(o, "dev"));
	unsigned a, b;
	int pos = 0;
	if (!s || sscanf(s, "%x:%x%n", &a, &b, &pos) != 2 || s[pos])
		return perr(c, "dev: expected \"MAJOR:MINOR\" in hexadecimal");
	*major = a;
	*minor = b;
	return 0;
}

static int parse_extents(struct pctx *c, json_t *o, struct img_extents *x)
{
	json_t *a, *e;
	size_t i;
	if (get_array(c, o, "extents", &a) < 0)
		return -EINVAL;
	x->v = xcalloc(json_array_size(a) + 1, sizeof(*x->v));
	x->cap = json_array_size(a) + 1;
	json_array_foreach(a, i, e)
	{
		json_int_t v[4];
		if (!json_is_array(e) || json_array_size(e) != 4)
			return perr(c, "extents[%zu]: expected [address, pages, offset, crc32c]",
				    i);
		for (size_t k = 0; k < 4; k++) {
			json_t *n = json_array_get(e, k);
			v[k] = json_is_integer(n) ? json_integer_value(n) : -1;
			if (v[k] < 0)
				return perr(c, "extents[%zu][%zu]: expected a non-negative integer",
					    i, k);
		}
		if (v[1] == 0 || v[1] > UINT32_MAX || v[3] > UINT32_MAX)
			return perr(c, "extents[%zu]: page count or checksum out of range", i);
		x->v[x->n++] = (struct img_extent){.addr = (uint64_t)v[0],
						   .pages = (uint32_t)v[1],
						   .off = (uint64_t)v[2],
						   .crc = (uint32_t)v[3]};
	}
	return 0;
}

static int parse_content(struct pctx *c, const char *s, enum img_content *out)
{
	for (int i = 0; i < IMG_CONTENT_COUNT; i++)
		if (s && strcmp(s, img_content_name((enum img_content)i)) == 0) {
			*out = (enum img_content)i;
			return 0;
		}
	return perr(c, "content: '%s' is not one of private, shared, file, skipped", s ? s : "");
}

static int parse_kind(struct pctx *c, const char *s, enum as_kind *out)
{
	for (int i = 0; i < AS_KIND_COUNT; i++)
		if (s && strcmp(s, as_kind_name((enum as_kind)i)) == 0) {
			*out = (enum as_kind)i;
			return 0;
		}
	return perr(c, "kind: '%s' is not a region kind", s ? s : "");
}

static int parse_region(struct pctx *c, json_t *o, struct img_proc *p)
{
	struct as_region src;
	memset(&src, 0, sizeof(src));
	uint8_t prot = 0;
	enum as_kind kind = AS_ANON;
	if (!json_is_object(o) || get_hex(c, o, "start", &src.start) < 0 ||
	    get_hex(c, o, "end", &src.end) < 0 || parse_prot(c, o, &prot) < 0 ||
	    parse_kind(c, json_string_value(json_object_get(o, "kind")), &kind) < 0 ||
	    get_u64(c, o, "offset", &src.offset) < 0 || get_u64(c, o, "inode", &src.inode) < 0 ||
	    parse_dev(c, o, &src.dev_major, &src.dev_minor) < 0 ||
	    get_u64(c, o, "committed", &src.committed) < 0)
		return -EINVAL;
	if (!json_is_boolean(json_object_get(o, "shared")))
		return perr(c, "shared: expected true or false");
	src.prot = prot;
	src.kind = kind;
	src.shared = json_is_true(json_object_get(o, "shared"));
	if (get_str_opt(c, o, "path", &src.path) < 0)
		return -EINVAL;
	struct img_region *r = img_add_region(p, &src);
	if (parse_content(c, json_string_value(json_object_get(o, "content")), &r->content) < 0)
		return -EINVAL;
	json_t *obj = json_object_get(o, "object");
	if (json_is_integer(obj))
		r->object = (long)json_integer_value(obj);
	else if (!json_is_null(obj))
		return perr(c, "object: expected an index or null");
	return parse_extents(c, o, &r->ext);
}

static int parse_regset(struct pctx *c, struct img_thread *t, const char *name, json_t *o)
{
	uint64_t note, size;
	const char *data = json_string_value(json_object_get(o, "data"));
	if (get_u64(c, o, "note", &note) < 0 || get_u64(c, o, "size", &size) < 0)
		return -EINVAL;
	if (!data || size > (1u << 20))
		return perr(c, "regsets.%s: expected data of at most 1 MiB", name);
	_cleanup_free_ void *buf = xmalloc(size + 3);
	long n = img_b64_decode(data, strlen(data), buf, size + 3);
	if (n < 0 || (uint64_t)n != size)
		return perr(c, "regsets.%s: data is not %llu bytes of base64", name,
			    (unsigned long long)size);
	img_thread_add_regset(t, name, (uint32_t)note, buf, (size_t)n);
	return 0;
}

static int parse_thread(struct pctx *c, json_t *o, struct img_proc *p)
{
	int tid, sig;
	if (!json_is_object(o) || get_i32(c, o, "tid", &tid) < 0 ||
	    get_i32(c, o, "signal", &sig) < 0)
		return -EINVAL;
	struct img_thread *t = img_add_thread(p, tid);
	t->signal = sig;
	t->group_stop = json_is_true(json_object_get(o, "group_stop"));
	t->vfork_wait = json_is_true(json_object_get(o, "vfork_wait"));
	json_t *rs = json_object_get(o, "regsets");
	if (!json_is_object(rs))
		return perr(c, "regsets: expected an object");
	const char *name;
	json_t *v;
	json_object_foreach(rs, name, v)
	{
		if (t->n_regs >= IMG_MAX_REGSETS)
			return perr(c, "regsets: more than %d", IMG_MAX_REGSETS);
		if (parse_regset(c, t, name, v) < 0)
			return -EINVAL;
	}
	return 0;
}

static int parse_cmdline(struct pctx *c, json_t *o, struct img_proc *p)
{
	json_t *a = json_object_get(o, "cmdline"), *s;
	size_t i, len = 0;
	if (!json_is_array(a))
		return perr(c, "cmdline: expected an array of strings");
	json_array_foreach(a, i, s)
	{
		if (!json_is_string(s))
			return perr(c, "cmdline[%zu]: expected a string", i);
		len += json_string_length(s) + 1;
	}
	p->cmdline = xmalloc(len + 1);
	json_array_foreach(a, i, s)
	{
		memcpy(p->cmdline + p->cmdline_len, json_string_value(s),
		       json_string_length(s) + 1);
		p->cmdline_len += json_string_length(s) + 1;
	}
	return 0;
}

static int parse_proc(struct pctx *c, json_t *o, struct img *im, size_t idx)
{
	int pid, ppid;
	uint64_t pause;
	snprintf(c->where, sizeof(c->where), "processes[%zu]", idx);
	if (!json_is_object(o))
		return perr(c, "expected an object");
	if (get_i32(c, o, "pid", &pid) < 0 || get_i32(c, o, "ppid", &ppid) < 0 ||
	    get_u64(c, o, "pause_ns", &pause) < 0)
		return -EINVAL;
	struct img_proc *p = img_add_proc(im, pid);
	p->ppid = ppid;
	p->pause_ns = pause;
	const char *state = json_string_value(json_object_get(o, "state"));
	if (!state || (strcmp(state, "gone") != 0 && strcmp(state, "dumped") != 0))
		return perr(c, "state: expected \"dumped\" or \"gone\"");
	p->gone = strcmp(state, "gone") == 0;
	if (get_str_opt(c, o, "exe", &p->exe) < 0 || parse_cmdline(c, o, p) < 0)
		return -EINVAL;
	json_t *a, *v;
	size_t i;
	if (get_array(c, o, "threads", &a) < 0)
		return -EINVAL;
	json_array_foreach(a, i, v)
	{
		snprintf(c->where, sizeof(c->where), "processes[%zu].threads[%zu]", idx, i);
		if (parse_thread(c, v, p) < 0)
			return -EINVAL;
	}
	snprintf(c->where, sizeof(c->where), "processes[%zu]", idx);
	if (get_array(c, o, "regions", &a) < 0)
		return -EINVAL;
	json_array_foreach(a, i, v)
	{
		snprintf(c->where, sizeof(c->where), "processes[%zu].regions[%zu]", idx, i);
		if (parse_region(c, v, p) < 0)
			return -EINVAL;
	}
	return 0;
}

static int parse_object(struct pctx *c, json_t *o, struct img *im, size_t idx)
{
	snprintf(c->where, sizeof(c->where), "objects[%zu]", idx);
	uint64_t inode, size;
	uint32_t major, minor;
	char *path;
	if (!json_is_object(o) || get_u64(c, o, "inode", &inode) < 0 ||
	    get_u64(c, o, "size", &size) < 0 || parse_dev(c, o, &major, &minor) < 0 ||
	    get_str_opt(c, o, "path", &path) < 0)
		return -EINVAL;
	struct img_object *ob = img_add_object(im, inode, major, minor, NULL);
	ob->path = path;
	ob->size = size;
	if (get_str_buf(c, o, "source", ob->source, sizeof(ob->source)) < 0)
		return -EINVAL;
	const char *cov = json_string_value(json_object_get(o, "coverage"));
	if (cov && strcmp(cov, "whole") == 0)
		ob->coverage = IMG_COVER_WHOLE;
	else if (cov && strcmp(cov, "mapped") == 0)
		ob->coverage = IMG_COVER_MAPPED;
	else
		return perr(c, "coverage: expected \"whole\" or \"mapped\"");
	return parse_extents(c, o, &ob->ext);
}

static int parse_totals(struct pctx *c, json_t *o, struct img_totals *t)
{
	snprintf(c->where, sizeof(c->where), "totals");
	uint64_t v[9];
	static const char *const keys[] = {"processes",	 "gone",	 "threads",
					   "regions",	 "objects",	 "extents",
					   "data_bytes", "shared_bytes", "committed"};
	if (!json_is_object(o))
		return perr(c, "expected an object");
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (get_u64(c, o, keys[i], &v[i]) < 0)
			return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->processes = v[0];
	t->gone = v[1];
	t->threads = v[2];
	t->regions = v[3];
	t->objects = v[4];
	t->extents = v[5];
	t->data_bytes = v[6];
	t->shared_bytes = v[7];
	t->committed = v[8];
	json_t *bk = json_object_get(o, "by_kind");
	for (int k = 0; k < AS_KIND_COUNT; k++) {
		json_t *n = json_object_get(bk, as_kind_name((enum as_kind)k));
		if (n && json_is_integer(n) && json_integer_value(n) >= 0)
			t->by_kind[k] = (uint64_t)json_integer_value(n);
	}
	return 0;
}

static int parse_top(struct pctx *c, json_t *root, struct img *im)
{
	const char *fmt = json_string_value(json_object_get(root, "format"));
	uint64_t version, page;
	if (!fmt || strcmp(fmt, IMG_FORMAT) != 0)
		return perr(c, "format: not a %s manifest", IMG_FORMAT);
	if (get_u64(c, root, "version", &version) < 0)
		return -EINVAL;
	if (version < IMG_VERSION_MIN || version > IMG_VERSION)
		return perr(c, "version %llu; this memvisor reads versions %d to %d",
			    (unsigned long long)version, IMG_VERSION_MIN, IMG_VERSION);
	im->version = (uint32_t)version;
	if (version >= 2 && get_u64(c, root, "page_sums_offset", &im->sums_off) < 0)
		return -EINVAL;
	if (get_u64(c, root, "page_size", &page) < 0)
		return -EINVAL;
	if (page != IMG_PAGE)
		return perr(c, "page_size %llu is not %u", (unsigned long long)page, IMG_PAGE);
	const char *sum = json_string_value(json_object_get(root, "checksum"));
	if (!sum || strcmp(sum, "crc32c") != 0)
		return perr(c, "checksum: only crc32c is known");
	if (get_str_buf(c, root, "id", im->id, sizeof(im->id)) < 0 ||
	    get_str_buf(c, root, "memvisor", im->memvisor, sizeof(im->memvisor)) < 0 ||
	    get_str_buf(c, root, "kernel", im->kernel, sizeof(im->kernel)) < 0 ||
	    get_str_buf(c, root, "arch", im->arch, sizeof(im->arch)) < 0 ||
	    get_u64(c, root, "created_ns", &im->created_ns) < 0 ||
	    get_u64(c, root, "pages_size", &im->pages_size) < 0 ||
	    get_u64(c, root, "pause_ns", &im->pause_ns) < 0)
		return -EINVAL;
	if (strlen(im->id) != 32 || strspn(im->id, "0123456789abcdef") != 32)
		return perr(c, "id: expected 32 hexadecimal digits");
	/* Optional (images before it have none). */
	json_t *sup = json_object_get(root, "supervisor");
	if (sup) {
		json_t *pid = json_object_get(sup, "pid"), *name = json_object_get(sup, "name");
		if (!json_is_object(sup) || !json_is_integer(pid) || json_integer_value(pid) <= 0 ||
		    json_integer_value(pid) > INT32_MAX || (name && !json_is_string(name)))
			return perr(c, "supervisor: expected {\"pid\": N, \"name\": \"...\"}");
		im->sup_pid = (int32_t)json_integer_value(pid);
		if (name)
			snprintf(im->sup_name, sizeof(im->sup_name), "%s", json_string_value(name));
	}
	return 0;
}

int img_manifest_parse(const char *text, size_t len, struct img *im, struct mv_err *err)
{
	struct pctx c = {.err = err};
	img_init(im);
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root) {
		mv_err_set(err, 0, NULL, "manifest: not JSON: %s (line %d)", je.text, je.line);
		return -EINVAL;
	}
	int rc = -EINVAL;
	json_t *a, *v;
	size_t i;
	if (!json_is_object(root)) {
		perr(&c, "expected an object");
		goto out;
	}
	if (parse_top(&c, root, im) < 0 ||
	    parse_totals(&c, json_object_get(root, "totals"), &im->recorded) < 0)
		goto out;
	c.where[0] = '\0';
	if (get_array(&c, root, "processes", &a) < 0)
		goto out;
	json_array_foreach(a, i, v) if (parse_proc(&c, v, im, i) < 0) goto out;
	c.where[0] = '\0';
	if (get_array(&c, root, "objects", &a) < 0)
		goto out;
	json_array_foreach(a, i, v) if (parse_object(&c, v, im, i) < 0) goto out;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* ---- validation ----------------------------------------------------------- */

struct fileref {
	uint64_t off, len;
	const char *owner; /* for the message */
	long proc;	   /* index of its process, or -1: an object's */
};

static int cmp_fileref(const void *a, const void *b)
{
	const struct fileref *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int fail_extent(struct mv_err *err, const char *owner, size_t i, const struct img_extent *e,
		       const char *why)
{
	return mv_err_set(err, -EINVAL, NULL,
			  "%s extent %zu (%#llx, %u pages at pages offset %#llx): %s", owner, i,
			  (unsigned long long)e->addr, e->pages, (unsigned long long)e->off, why);
}

/* Extents of one region or object: aligned, sorted, disjoint, inside
 * [lo, hi), each in one 2 MiB block and inside the pages file. */
static int check_extents(const struct img_extents *x, uint64_t lo, uint64_t hi, uint64_t pages_size,
			 const char *owner, struct mv_err *err)
{
	uint64_t prev_end = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct img_extent *e = &x->v[i];
		uint64_t len = img_extent_len(e);
		const char *why = NULL;
		if (e->addr % IMG_PAGE || e->off % IMG_PAGE)
			why = "not page-aligned";
		else if (e->addr < lo || e->addr + len > hi || e->addr + len < e->addr)
			why = "outside its region";
		else if (i && e->addr < prev_end)
			why = "overlaps or precedes the extent before it";
		else if (e->addr / IMG_EXTENT_MAX != (e->addr + len - 1) / IMG_EXTENT_MAX)
			why = "crosses a 2 MiB boundary";
		else if (e->off < IMG_HEADER_SIZE || e->off + len > pages_size ||
			 e->off + len < e->off)
			why = "outside the pages file";
		if (why)
			return fail_extent(err, owner, i, e, why);
		prev_end = e->addr + len;
	}
	return 0;
}

static void region_owner(char *buf, size_t len, const struct img_proc *p,
			 const struct img_region *r)
{
	snprintf(buf, len, "process %d region %#llx-%#llx", p->pid, (unsigned long long)r->start,
		 (unsigned long long)r->end);
}

static int check_region(const struct img *im, const struct img_proc *p, size_t k, uint64_t data_end,
			struct mv_err *err)
{
	const struct img_region *r = &p->r[k];
	char owner[96];
	region_owner(owner, sizeof(owner), p, r);
	if (r->start >= r->end || r->start % IMG_PAGE || r->end % IMG_PAGE)
		return mv_err_set(err, -EINVAL, NULL, "%s: empty or not page-aligned", owner);
	if (k && r->start < p->r[k - 1].end)
		return mv_err_set(err, -EINVAL, NULL,
				  "%s: overlaps or precedes the region before it", owner);
	if (r->content == IMG_SHARED) {
		if (r->object < 0 || (size_t)r->object >= im->n_o)
			return mv_err_set(err, -EINVAL, NULL, "%s: object %ld does not exist",
					  owner, r->object);
	} else if (r->object >= 0) {
		return mv_err_set(err, -EINVAL, NULL, "%s: a %s region names an object", owner,
				  img_content_name(r->content));
	}
	if (r->content != IMG_PRIVATE && r->ext.n)
		return mv_err_set(err, -EINVAL, NULL, "%s: a %s region has extents", owner,
				  img_content_name(r->content));
	return check_extents(&r->ext, r->start, r->end, data_end, owner, err);
}

static int check_proc(const struct img *im, const struct img_proc *p, uint64_t data_end,
		      struct mv_err *err)
{
	if (p->pid <= 0)
		return mv_err_set(err, -EINVAL, NULL, "a process has pid %d", p->pid);
	if (p->gone && (p->n_t || p->n_r))
		return mv_err_set(err, -EINVAL, NULL,
				  "process %d is gone but has threads or regions", p->pid);
	for (size_t i = 0; i < p->n_t; i++)
		if (p->t[i].tid <= 0)
			return mv_err_set(err, -EINVAL, NULL, "process %d: a thread has tid %d",
					  p->pid, p->t[i].tid);
	for (size_t k = 0; k < p->n_r; k++) {
		int rc = check_region(im, p, k, data_end, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void add_refs(const struct img_extents *x, const char *owner, long proc, struct fileref **v,
		     size_t *n)
{
	for (size_t i = 0; i < x->n; i++)
		(*v)[(*n)++] = (struct fileref){x->v[i].off, img_extent_len(&x->v[i]), owner, proc};
}

/* No two extents share a byte of the pages file, but from version 3
 * extents of two different processes (a page shared copy-on-write,
 * stored once). */
static int check_file_overlap(const struct img *im, size_t n_ext, struct mv_err *err)
{
	_cleanup_free_ struct fileref *v = xcalloc(n_ext + 1, sizeof(*v));
	_cleanup_free_ uint64_t *proc_end = xcalloc(im->n_p + 1, sizeof(*proc_end));
	size_t n = 0;
	for (size_t i = 0; i < im->n_p; i++)
		for (size_t k = 0; k < im->p[i].n_r; k++)
			add_refs(&im->p[i].r[k].ext, "a region", (long)i, &v, &n);
	for (size_t i = 0; i < im->n_o; i++)
		add_refs(&im->o[i].ext, "an object", -1, &v, &n);
	mv_qsort(v, n, sizeof(*v), cmp_fileref);
	/* The furthest end so far: of any extent, of an object's. */
	uint64_t end = 0, obj_end = 0;
	const char *end_owner = "";
	bool share = im->version >= 3;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = v[i].off + v[i].len;
		bool bad =
		    v[i].off < obj_end ||
		    (v[i].off < end && (!share || v[i].proc < 0 || v[i].off < proc_end[v[i].proc]));
		if (bad)
			return mv_err_set(
			    err, -EINVAL, NULL,
			    "two extents overlap in the pages file at offset %#llx (%s, %s)",
			    (unsigned long long)v[i].off, end_owner, v[i].owner);
		if (v[i].proc >= 0)
			proc_end[v[i].proc] = MV_MAX(proc_end[v[i].proc], e);
		else
			obj_end = MV_MAX(obj_end, e);
		if (e > end) {
			end = e;
			end_owner = v[i].owner;
		}
	}
	return 0;
}

static int check_totals(const struct img_totals *t, const struct img_totals *r, struct mv_err *err)
{
	const struct {
		const char *name;
		uint64_t got, want;
	} f[] = {
	    {"processes", t->processes, r->processes},
	    {"gone", t->gone, r->gone},
	    {"threads", t->threads, r->threads},
	    {"regions", t->regions, r->regions},
	    {"objects", t->objects, r->objects},
	    {"extents", t->extents, r->extents},
	    {"data_bytes", t->data_bytes, r->data_bytes},
	    {"shared_bytes", t->shared_bytes, r->shared_bytes},
	    {"committed", t->committed, r->committed},
	};
	for (size_t i = 0; i < ARRAY_SIZE(f); i++)
		if (f[i].got != f[i].want)
			return mv_err_set(
			    err, -EINVAL, NULL, "totals.%s is %llu but the content adds up to %llu",
			    f[i].name, (unsigned long long)f[i].want, (unsigned long long)f[i].got);
	return 0;
}

int img_validate(const struct img *im, struct mv_err *err)
{
	if (im->pages_size < IMG_HEADER_SIZE || im->pages_size % IMG_PAGE)
		return mv_err_set(err, -EINVAL, NULL,
				  "pages_size %llu is not a whole number of pages after the header",
				  (unsigned long long)im->pages_size);
	/* Version 2: extents, then the page checksums, end the file. */
	uint64_t data_end = im->pages_size;
	if (im->version >= 2) {
		if (im->sums_off < IMG_HEADER_SIZE || im->sums_off % IMG_PAGE ||
		    im->sums_off > im->pages_size ||
		    im->pages_size - im->sums_off != img_sums_bytes(im->sums_off))
			return mv_err_set(err, -EINVAL, NULL,
					  "page_sums_offset %llu does not fit pages_size %llu",
					  (unsigned long long)im->sums_off,
					  (unsigned long long)im->pages_size);
		data_end = im->sums_off;
	}
	for (size_t i = 0; i < im->n_p; i++) {
		for (size_t j = 0; j < i; j++)
			if (im->p[j].pid == im->p[i].pid)
				return mv_err_set(err, -EINVAL, NULL, "process %d is listed twice",
						  im->p[i].pid);
		int rc = check_proc(im, &im->p[i], data_end, err);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < im->n_o; i++) {
		const struct img_object *o = &im->o[i];
		char owner[64];
		snprintf(owner, sizeof(owner), "object %zu", i);
		int rc = check_extents(&o->ext, 0, o->size, data_end, owner, err);
		if (rc < 0)
			return rc;
	}
	struct img_totals t;
	img_totals(im, &t);
	int rc = check_totals(&t, &im->recorded, err);
	if (rc < 0)
		return rc;
	/* (From version 3 the sum counts a shared page once per process.) */
	if (im->version < 3 && t.data_bytes > data_end - IMG_HEADER_SIZE)
		return mv_err_set(err, -EINVAL, NULL,
				  "the extents hold more bytes than the pages file");
	return check_file_overlap(im, t.extents, err);
}
