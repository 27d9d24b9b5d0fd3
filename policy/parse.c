/* Policy files: JSON in, struct policy out, every error with its place.
 *
 * jansson parses (and reports syntax errors with a line and column);
 * policy/jpos.c finds where each value is, so that a semantic error can
 * name its line, column and JSON pointer too. Validation goes on after an
 * error, so one run lists everything that is wrong. */
#include "common/util.h"
#include "policy/callargs.h"
#include "policy/jpos.h"
#include "policy/names.h"
#include "policy/policy.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

/* Policy files are small; a bigger one is a mistake (or an attack on
 * whoever runs `policy set`). */
#define POLICY_MAX_BYTES (1 << 20)
#define POLICY_MAX_RULES 1024
#define RULE_NAME_MAX	 64

void pol_diag_add(struct pol_diag *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	if (!m)
		return;
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 8;
		d->msg = xrealloc(d->msg, d->cap * sizeof(*d->msg));
	}
	d->msg[d->n++] = m;
}

void pol_diag_free(struct pol_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->msg[i]);
	free(d->msg);
	memset(d, 0, sizeof(*d));
}

struct pctx {
	const char *file;
	struct jpos pos;
	struct pol_diag *d;
	int errors;
};

enum at { AT_VALUE, AT_KEY };

static void perr(struct pctx *x, const char *ptr, enum at at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void perr(struct pctx *x, const char *ptr, enum at at, const char *fmt, ...)
{
	const struct jpos_entry *e = jpos_find(&x->pos, ptr);
	int line = 1, col = 1;
	if (e) {
		line = at == AT_KEY ? e->key_line : e->line;
		col = at == AT_KEY ? e->key_col : e->col;
	}
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pol_diag_add(x->d, "%s:%d:%d: %s: %s", x->file, line, col, *ptr ? ptr : "/", msg);
	x->errors++;
}

/* ---- values ---------------------------------------------------------- */

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number with a fraction";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

static char *human(uint64_t v, char *buf, size_t len)
{
	return mv_human_size(v, buf, len);
}

/* A size: a non-negative integer of bytes, or a string like "512M". */
static int get_size(struct pctx *x, json_t *v, const char *ptr, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	uint64_t n;
	char b1[32], b2[32];
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0) {
			perr(x, ptr, AT_VALUE, "a size cannot be negative (%lld)", (long long)i);
			return -EINVAL;
		}
		n = (uint64_t)i;
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		int rc = mv_parse_size(s, &n);
		if (rc == -ERANGE) {
			perr(x, ptr, AT_VALUE, "size \"%s\" is too large", s);
			return rc;
		}
		if (rc < 0) {
			perr(x, ptr, AT_VALUE,
			     "\"%s\" is not a size (bytes, or a number with K, M, G or T)", s);
			return rc;
		}
	} else {
		perr(x, ptr, AT_VALUE,
		     "expected a size (an integer of bytes or a string like \"512M\"), got %s",
		     type_name(v));
		return -EINVAL;
	}
	if (n < min) {
		perr(x, ptr, AT_VALUE, "must be at least %s (%llu bytes)",
		     human(min, b1, sizeof(b1)), (unsigned long long)min);
		return -EINVAL;
	}
	if (n > max) {
		perr(x, ptr, AT_VALUE, "%s is more than the %s x86-64 address space",
		     human(n, b1, sizeof(b1)), human(max, b2, sizeof(b2)));
		return -EINVAL;
	}
	*out = n;
	return 0;
}

static const char *get_string(struct pctx *x, json_t *v, const char *ptr)
{
	if (!json_is_string(v)) {
		perr(x, ptr, AT_VALUE, "expected a string, got %s", type_name(v));
		return NULL;
	}
	return json_string_value(v);
}

/* Unknown keys are errors: a misspelt condition must not silently match
 * everything. */
static void check_keys(struct pctx *x, json_t *obj, const char *ptr, const char *const *known)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v)
	{
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strcmp(*k, key) == 0;
		if (ok)
			continue;
		_cleanup_free_ char *cp = jpos_child(ptr, key);
		perr(x, cp, AT_KEY, "unknown key \"%s\"", key);
	}
}

static int get_action(struct pctx *x, json_t *v, const char *ptr, enum mv_verdict *out)
{
	const char *s = get_string(x, v, ptr);
	if (!s)
		return -EINVAL;
	if (names_action(s, out) < 0) {
		perr(x, ptr, AT_VALUE, "unknown action \"%s\" (allow, log, deny or kill)", s);
		return -EINVAL;
	}
	return 0;
}

static int get_errno(struct pctx *x, json_t *v, const char *ptr, int *out)
{
	const char *s = get_string(x, v, ptr);
	if (!s)
		return -EINVAL;
	if (names_errno(s, out) < 0) {
		perr(x, ptr, AT_VALUE, "unknown errno \"%s\" (a name like EPERM or ENOMEM)", s);
		return -EINVAL;
	}
	return 0;
}

/* An action with its optional errno, from an object holding "action" and
 * "errno" (a rule, or the object form of "default"). */
static void get_verdict(struct pctx *x, json_t *obj, const char *ptr, enum mv_verdict *v, int *err)
{
	json_t *a = json_object_get(obj, "action");
	json_t *e = json_object_get(obj, "errno");
	*v = MV_V_DENY;
	*err = EPERM;
	if (!a) {
		perr(x, ptr, AT_VALUE, "missing key \"action\"");
	} else {
		_cleanup_free_ char *ap = jpos_child(ptr, "action");
		get_action(x, a, ap, v);
	}
	if (e) {
		_cleanup_free_ char *ep = jpos_child(ptr, "errno");
		if (get_errno(x, e, ep, err) == 0 && a && *v != MV_V_DENY)
			perr(x, ep, AT_KEY, "\"errno\" only goes with action \"deny\"");
	}
}

/* ---- rules ----------------------------------------------------------- */

static void rule_syscalls(struct pctx *x, json_t *v, const char *ptr, struct pol_rule *r)
{
	if (!json_is_array(v) || json_array_size(v) == 0) {
		perr(x, ptr, AT_VALUE, "expected a non-empty array of syscall names, got %s",
		     json_is_array(v) ? "an empty array" : type_name(v));
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		_cleanup_free_ char *ep = jpos_index(ptr, i);
		const char *name = get_string(x, e, ep);
		if (!name)
			continue;
		enum mv_sc sc = syscalls_by_name(name);
		if (sc == MV_SC_UNKNOWN) {
			perr(x, ep, AT_VALUE,
			     "unknown syscall \"%s\" (memvisor knows the calls in docs/policy.md)",
			     name);
			continue;
		}
		r->syscalls |= 1ULL << sc;
		/* A rule on mmap covers mmap2, i386's mmap with a page offset;
		 * one on mprotect covers pkey_mprotect, which is mprotect with
		 * a protection key (same prot and length), else a way around
		 * the rule. */
		if (sc == MV_SC_mmap)
			r->syscalls |= 1ULL << MV_SC_mmap2;
		if (sc == MV_SC_mprotect)
			r->syscalls |= 1ULL << MV_SC_pkey_mprotect;
	}
}

/* The syscalls of a rule that lack an argument, for a message; NULL when
 * every one has it. */
static const char *lacking(const struct pol_rule *r, int which)
{
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		if (!(r->syscalls & (1ULL << sc)))
			continue;
		struct callargs_layout l = callargs_layout((enum mv_sc)sc, MV_ABI_X86_64);
		int idx = which == 0 ? l.prot : which == 1 ? l.flags : which == 2 ? l.len : -1;
		if (which == 3 ? !l.backing : idx < 0)
			return syscalls_name((enum mv_sc)sc);
	}
	return NULL;
}

static int get_bits(struct pctx *x, json_t *v, const char *ptr, enum names_family f, uint64_t *out)
{
	*out = 0;
	if (!json_is_array(v)) {
		perr(x, ptr, AT_VALUE, "expected an array of %s names, got %s", names_prefix(f),
		     type_name(v));
		return -EINVAL;
	}
	int bad = 0;
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		_cleanup_free_ char *ep = jpos_index(ptr, i);
		const char *name = get_string(x, e, ep);
		uint64_t bits;
		if (!name) {
			bad++;
		} else if (names_flag(f, name, &bits) < 0) {
			perr(x, ep, AT_VALUE, "unknown %s name \"%s\" (one of %s)", names_prefix(f),
			     name, names_list(f));
			bad++;
		} else {
			*out |= bits;
		}
	}
	return bad ? -EINVAL : 0;
}

/* prot_has/prot_lacks or flags_has/flags_lacks. */
static void rule_bits(struct pctx *x, json_t *obj, const char *ptr, struct pol_rule *r, bool prot)
{
	const char *khas = prot ? "prot_has" : "flags_has";
	const char *klacks = prot ? "prot_lacks" : "flags_lacks";
	json_t *has = json_object_get(obj, khas), *lacks = json_object_get(obj, klacks);
	if (!has && !lacks)
		return;
	_cleanup_free_ char *phas = jpos_child(ptr, khas);
	_cleanup_free_ char *placks = jpos_child(ptr, klacks);
	const char *first = has ? phas : placks;
	const char *missing = lacking(r, prot ? 0 : 1);
	if (missing) {
		perr(x, first, AT_KEY, "%s has no %s argument", missing, prot ? "prot" : "flags");
		return;
	}
	enum names_family f = NAMES_PROT;
	if (!prot) {
		f = NAMES_NONE;
		for (int sc = 0; sc < MV_SC_COUNT; sc++) {
			if (!(r->syscalls & (1ULL << sc)))
				continue;
			enum names_family g = callargs_layout((enum mv_sc)sc, MV_ABI_X86_64).family;
			if (f != NAMES_NONE && g != f) {
				perr(
				    x, first, AT_KEY,
				    "the rule's syscalls name their flags differently (%s and %s): "
				    "write one rule for each",
				    names_prefix(f), names_prefix(g));
				return;
			}
			f = g;
		}
	}
	uint64_t h = 0, l = 0;
	int rc = 0;
	if (has)
		rc |= get_bits(x, has, phas, f, &h);
	if (lacks)
		rc |= get_bits(x, lacks, placks, f, &l);
	if (rc)
		return;
	if (h & l) {
		const char *n = names_flag_name(f, h & l);
		perr(x, placks, AT_KEY, "%s%s is in both %s and %s", n ? "" : "a flag", n ? n : "",
		     khas, klacks);
		return;
	}
	if (prot) {
		r->has_prot = true;
		r->prot_has = h;
		r->prot_lacks = l;
	} else {
		r->has_flags = true;
		r->flags_has = h;
		r->flags_lacks = l;
	}
}

static void rule_length(struct pctx *x, json_t *obj, const char *ptr, struct pol_rule *r)
{
	json_t *mn = json_object_get(obj, "length_min"), *mx = json_object_get(obj, "length_max");
	if (!mn && !mx)
		return;
	_cleanup_free_ char *pmin = jpos_child(ptr, "length_min");
	_cleanup_free_ char *pmax = jpos_child(ptr, "length_max");
	const char *missing = lacking(r, 2);
	if (missing) {
		perr(x, mn ? pmin : pmax, AT_KEY, "%s has no length argument", missing);
		return;
	}
	uint64_t lo = 0, hi = UINT64_MAX;
	int rc = 0;
	if (mn)
		rc |= get_size(x, mn, pmin, 0, UINT64_MAX, &lo);
	if (mx)
		rc |= get_size(x, mx, pmax, 0, UINT64_MAX, &hi);
	if (rc)
		return;
	if (lo > hi) {
		perr(x, pmin, AT_VALUE, "length_min (%llu) is above length_max (%llu)",
		     (unsigned long long)lo, (unsigned long long)hi);
		return;
	}
	r->has_len = true;
	r->len_min = lo;
	r->len_max = hi;
}

static void rule_backing(struct pctx *x, json_t *obj, const char *ptr, struct pol_rule *r)
{
	json_t *v = json_object_get(obj, "backing");
	if (!v)
		return;
	_cleanup_free_ char *bp = jpos_child(ptr, "backing");
	const char *missing = lacking(r, 3);
	if (missing) {
		perr(x, bp, AT_KEY,
		     "%s cannot tell anonymous from file-backed memory (only mmap can)", missing);
		return;
	}
	const char *s = get_string(x, v, bp);
	if (!s)
		return;
	if (strcmp(s, "anon") == 0)
		r->backing = POL_BACKING_ANON;
	else if (strcmp(s, "file") == 0)
		r->backing = POL_BACKING_FILE;
	else
		perr(x, bp, AT_VALUE, "unknown backing \"%s\" (anon or file)", s);
}

static void rule_name(struct pctx *x, json_t *obj, const char *ptr, size_t idx, struct pol_rule *r)
{
	json_t *v = json_object_get(obj, "name");
	char def[32];
	snprintf(def, sizeof(def), "rules[%zu]", idx);
	r->name = xstrdup(def);
	if (!v)
		return;
	_cleanup_free_ char *np = jpos_child(ptr, "name");
	const char *s = get_string(x, v, np);
	if (!s)
		return;
	size_t len = strlen(s);
	bool printable = len > 0;
	for (const char *c = s; *c && printable; c++)
		printable = (unsigned char)*c >= 0x20 && *c != 0x7f;
	if (!printable || len > RULE_NAME_MAX) {
		perr(x, np, AT_VALUE, "a rule name is 1 to %d printable characters", RULE_NAME_MAX);
		return;
	}
	free(r->name);
	r->name = xstrdup(s);
}

static const char *const rule_keys[] = {
    "name",	  "syscalls",	"prot_has", "prot_lacks", "flags_has", "flags_lacks",
    "length_min", "length_max", "backing",  "action",	  "errno",     NULL,
};

static void parse_rule(struct pctx *x, json_t *obj, const char *ptr, size_t idx, struct pol_rule *r)
{
	memset(r, 0, sizeof(*r));
	r->len_max = UINT64_MAX;
	r->err = EPERM;
	rule_name(x, obj, ptr, idx, r);
	if (!json_is_object(obj)) {
		perr(x, ptr, AT_VALUE, "expected a rule object, got %s", type_name(obj));
		return;
	}
	check_keys(x, obj, ptr, rule_keys);
	json_t *sc = json_object_get(obj, "syscalls");
	if (!sc) {
		perr(x, ptr, AT_VALUE, "missing key \"syscalls\"");
	} else {
		_cleanup_free_ char *sp = jpos_child(ptr, "syscalls");
		rule_syscalls(x, sc, sp, r);
	}
	/* Conditions are checked against the syscalls only when those are known. */
	if (r->syscalls) {
		rule_bits(x, obj, ptr, r, true);
		rule_bits(x, obj, ptr, r, false);
		rule_length(x, obj, ptr, r);
		rule_backing(x, obj, ptr, r);
	}
	get_verdict(x, obj, ptr, &r->action, &r->err);
}

static void parse_rules(struct pctx *x, json_t *v, struct policy *p)
{
	if (!json_is_array(v)) {
		perr(x, "/rules", AT_VALUE, "expected an array of rules, got %s", type_name(v));
		return;
	}
	size_t n = json_array_size(v);
	if (n > POLICY_MAX_RULES) {
		perr(x, "/rules", AT_VALUE, "%zu rules: at most %d", n, POLICY_MAX_RULES);
		return;
	}
	p->rules = xcalloc(n ? n : 1, sizeof(*p->rules));
	p->n_rules = n;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *rp = jpos_index("/rules", i);
		parse_rule(x, json_array_get(v, i), rp, i, &p->rules[i]);
		for (size_t j = 0; j < i; j++) {
			if (strcmp(p->rules[j].name, p->rules[i].name) == 0) {
				_cleanup_free_ char *np = jpos_child(rp, "name");
				perr(x, np, AT_VALUE,
				     "rule name \"%s\" is also the name of rules[%zu]",
				     p->rules[i].name, j);
				break;
			}
		}
	}
}

/* ---- top level ------------------------------------------------------- */

static void parse_default(struct pctx *x, json_t *v, struct policy *p)
{
	if (json_is_object(v)) {
		static const char *const keys[] = {"action", "errno", NULL};
		check_keys(x, v, "/default", keys);
		get_verdict(x, v, "/default", &p->dflt, &p->dflt_err);
	} else if (json_is_string(v)) {
		get_action(x, v, "/default", &p->dflt);
	} else {
		perr(x, "/default", AT_VALUE,
		     "expected an action (\"allow\", \"log\", \"deny\", \"kill\") or "
		     "{\"action\": ..., \"errno\": ...}, got %s",
		     type_name(v));
	}
}

static void parse_limits(struct pctx *x, json_t *v, struct policy *p)
{
	if (!json_is_object(v)) {
		perr(x, "/limits", AT_VALUE, "expected an object, got %s", type_name(v));
		return;
	}
	static const char *const keys[] = {"max_mapped", "max_mapped_tree", "max_mapping",
					   "max_regions", NULL};
	check_keys(x, v, "/limits", keys);
	static const struct {
		const char *key;
		size_t off;
		uint64_t min;
	} sizes[] = {
	    {"max_mapped", offsetof(struct pol_limits, max_mapped), POL_PAGE},
	    {"max_mapped_tree", offsetof(struct pol_limits, max_mapped_tree), POL_PAGE},
	    {"max_mapping", offsetof(struct pol_limits, max_mapping), 1},
	};
	/* null is "no limit", as the canonical form (policy_to_json) says it. */
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		json_t *e = json_object_get(v, sizes[i].key);
		if (!e || json_is_null(e))
			continue;
		_cleanup_free_ char *ep = jpos_child("/limits", sizes[i].key);
		get_size(x, e, ep, sizes[i].min, POL_MAX_SIZE,
			 (uint64_t *)((char *)&p->lim + sizes[i].off));
	}
	json_t *r = json_object_get(v, "max_regions");
	if (r && !json_is_null(r)) {
		/* vm.max_map_count is an int: no process can have more. */
		if (!json_is_integer(r))
			perr(x, "/limits/max_regions", AT_VALUE, "expected an integer, got %s",
			     type_name(r));
		else if (json_integer_value(r) < 1 || json_integer_value(r) > INT_MAX)
			perr(x, "/limits/max_regions", AT_VALUE, "must be from 1 to %d, not %lld",
			     INT_MAX, (long long)json_integer_value(r));
		else
			p->lim.max_regions = (uint64_t)json_integer_value(r);
	}
}

static void parse_wx(struct pctx *x, json_t *root, struct policy *p)
{
	json_t *v = json_object_get(root, "wx");
	if (v) {
		const char *s = get_string(x, v, "/wx");
		if (s && strcmp(s, "off") == 0)
			p->wx = POL_WX_OFF;
		else if (s && strcmp(s, "log") == 0)
			p->wx = POL_WX_LOG;
		else if (s && strcmp(s, "deny") == 0)
			p->wx = POL_WX_DENY;
		else if (s)
			perr(x, "/wx", AT_VALUE, "unknown wx mode \"%s\" (off, log or deny)", s);
	}
	v = json_object_get(root, "wx_mdwe");
	if (v && !json_is_boolean(v))
		perr(x, "/wx_mdwe", AT_VALUE, "expected true or false, got %s", type_name(v));
	else if (v)
		p->wx_mdwe = json_is_true(v);
	v = json_object_get(root, "wx_allow");
	if (!v)
		return;
	if (!json_is_array(v)) {
		perr(x, "/wx_allow", AT_VALUE, "expected an array of executable paths, got %s",
		     type_name(v));
		return;
	}
	size_t n = json_array_size(v);
	p->wx_allow = xcalloc(n + 1, sizeof(char *));
	p->wx_allow_real = xcalloc(n + 1, sizeof(char *));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		_cleanup_free_ char *ep = jpos_index("/wx_allow", i);
		const char *s = get_string(x, e, ep);
		if (!s)
			continue;
		if (s[0] != '/') {
			perr(x, ep, AT_VALUE, "\"%s\" is not an absolute path", s);
			continue;
		}
		p->wx_allow[p->n_wx_allow] = xstrdup(s);
		/* /proc/PID/exe names the file with symlinks resolved. */
		p->wx_allow_real[p->n_wx_allow] = realpath(s, NULL);
		p->n_wx_allow++;
	}
}

static const char *const root_keys[] = {"version", "description", "default", "rules", "limits",
					"wx",	   "wx_allow",	  "wx_mdwe", NULL};

static void parse_root(struct pctx *x, json_t *root, struct policy *p)
{
	if (!json_is_object(root)) {
		perr(x, "", AT_VALUE, "a policy is a JSON object, got %s", type_name(root));
		return;
	}
	check_keys(x, root, "", root_keys);
	json_t *v = json_object_get(root, "version");
	if (!v)
		perr(x, "", AT_VALUE, "missing key \"version\" (this memvisor reads version 1)");
	else if (!json_is_integer(v))
		perr(x, "/version", AT_VALUE, "expected the integer 1, got %s", type_name(v));
	else if (json_integer_value(v) != 1)
		perr(x, "/version", AT_VALUE, "unsupported version %lld (this memvisor reads 1)",
		     (long long)json_integer_value(v));
	if ((v = json_object_get(root, "description"))) {
		const char *s = get_string(x, v, "/description");
		if (s)
			p->description = xstrdup(s);
	}
	if ((v = json_object_get(root, "default")))
		parse_default(x, v, p);
	if ((v = json_object_get(root, "rules")))
		parse_rules(x, v, p);
	if ((v = json_object_get(root, "limits")))
		parse_limits(x, v, p);
	parse_wx(x, root, p);
}

static struct policy *policy_new(const char *source)
{
	struct policy *p = xcalloc(1, sizeof(*p));
	p->source = xstrdup(source);
	p->dflt = MV_V_ALLOW;
	p->dflt_err = EPERM;
	p->wx = POL_WX_OFF;
	p->wx_mdwe = true;
	return p;
}

/* A syntax error: jansson's position and text, and the pointer of the
 * innermost value the scanner had reached. */
static void syntax_error(struct pctx *x, const json_error_t *je)
{
	const char *ptr = x->pos.n ? x->pos.v[x->pos.n - 1].ptr : "";
	pol_diag_add(x->d, "%s:%d:%d: %s: invalid JSON: %s", x->file, je->line > 0 ? je->line : 1,
		     je->column > 0 ? je->column : 1, *ptr ? ptr : "/", je->text);
	x->errors++;
}

int policy_parse(const char *text, size_t len, const char *file, struct policy **out,
		 struct pol_diag *d)
{
	struct pctx x = {.file = file, .d = d};
	*out = NULL;
	json_error_t je;
	jpos_scan(text, len, &x.pos);
	json_t *root = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		syntax_error(&x, &je);
		jpos_free(&x.pos);
		return -EINVAL;
	}
	struct policy *p = policy_new(file);
	parse_root(&x, root, p);
	json_decref(root);
	jpos_free(&x.pos);
	if (x.errors) {
		policy_free(p);
		return -EINVAL;
	}
	*out = p;
	return 0;
}

int policy_read_file(const char *path, bool regular_only, char **out, size_t *len,
		     struct pol_diag *d)
{
	*out = NULL;
	*len = 0;
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (regular_only ? O_NONBLOCK : 0);
	_cleanup_close_ int fd = open(path, flags);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int err = errno;
		pol_diag_add(d, "%s: cannot open: %s", path, strerror(err));
		return -err;
	}
	if (regular_only && !S_ISREG(st.st_mode)) {
		pol_diag_add(d, "%s: not a regular file: a policy is read from a file", path);
		return -EINVAL;
	}
	/* One byte more than the limit tells a file over it. */
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = xmalloc(cap);
	for (;;) {
		if (n == cap) {
			if (cap > POLICY_MAX_BYTES)
				break;
			cap = MV_MIN(cap * 2, (size_t)POLICY_MAX_BYTES + 1);
			buf = xrealloc(buf, cap);
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			pol_diag_add(d, "%s: cannot read: %s", path, strerror(err));
			return -err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > POLICY_MAX_BYTES) {
		pol_diag_add(d, "%s: larger than %d bytes: not a policy", path, POLICY_MAX_BYTES);
		return -EFBIG;
	}
	*out = mv_steal_ptr(buf);
	*len = n;
	return 0;
}

int policy_load(const char *path, struct policy **out, struct pol_diag *d)
{
	*out = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t n;
	int rc = policy_read_file(path, false, &buf, &n, d);
	return rc < 0 ? rc : policy_parse(buf, n, path, out, d);
}

struct policy *policy_default(void)
{
	return policy_new("(built-in default)");
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_rules; i++)
		free(p->rules[i].name);
	free(p->rules);
	for (size_t i = 0; i < p->n_wx_allow; i++) {
		free(p->wx_allow[i]);
		free(p->wx_allow_real[i]);
	}
	free(p->wx_allow);
	free(p->wx_allow_real);
	free(p->description);
	free(p->source);
	free(p);
}
