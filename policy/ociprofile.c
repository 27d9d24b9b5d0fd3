#include "policy/ociprofile.h"
#include "common/util.h"

#include <errno.h>
#include <string.h>

static const char *const op_names[] = {
    [NEEDS_EQ] = "SCMP_CMP_EQ",
    [NEEDS_NE] = "SCMP_CMP_NE",
    [NEEDS_LT] = "SCMP_CMP_LT",
    [NEEDS_LE] = "SCMP_CMP_LE",
    [NEEDS_GT] = "SCMP_CMP_GT",
    [NEEDS_GE] = "SCMP_CMP_GE",
    [NEEDS_MASKED_EQ] = "SCMP_CMP_MASKED_EQ",
};

static bool terms_equal(const struct needs_sc *a, const struct needs_sc *b)
{
	if (a->all != b->all || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct needs_term *x = &a->t[i], *y = &b->t[i];
		if (x->n != y->n || memcmp(x->c, y->c, x->n * sizeof(x->c[0])))
			return false;
	}
	return true;
}

/* What the profile notifies of sc: 0 nothing, 1 some arguments (the
 * x86_64 terms, the same on every ABI that has the call), 2 all. */
static int wanted(const struct needs *n, enum mv_sc sc)
{
	const struct needs_sc *native = &n->sc[MV_ABI_X86_64][sc];
	int want = 0;
	for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
		const struct needs_sc *s = &n->sc[abi][sc];
		if (syscalls_nr(sc, (enum mv_abi)abi) < 0 || (!s->all && s->n == 0))
			continue;
		if (s->all || (s->n && s->t[0].n == 0))
			return 2;
		if (abi != MV_ABI_X86_64 && !terms_equal(s, native))
			return 2;
		want = 1;
	}
	return want == 1 && native->n == 0 ? 2 : want;
}

static json_t *term_args(const struct needs_term *t)
{
	json_t *args = json_array();
	for (int k = 0; k < t->n; k++) {
		const struct needs_cmp *c = &t->c[k];
		bool masked = c->op == NEEDS_MASKED_EQ;
		json_array_append_new(
		    args, json_pack("{s:i, s:I, s:I, s:s}", "index", (int)c->arg, "value",
				    (json_int_t)(masked ? c->mask : c->datum), "valueTwo",
				    (json_int_t)(masked ? c->datum : 0), "op", op_names[c->op]));
	}
	return args;
}

static json_t *notify_rule(const char *name, json_t *args)
{
	json_t *r = json_pack("{s:[s], s:s}", "names", name, "action", "SCMP_ACT_NOTIFY");
	if (args)
		json_object_set_new(r, "args", args);
	return r;
}

/* Does the base allow name unconditionally (1), for some arguments only
 * (a rule with args: 2), or not at all (0)? With no base: 1. */
static int base_allows(const json_t *rules, const char *name, bool default_allow)
{
	size_t i, j;
	json_t *r, *nm;
	int found = default_allow ? 1 : 0;
	json_array_foreach(rules, i, r)
	{
		const char *act = json_string_value(json_object_get(r, "action"));
		json_array_foreach(json_object_get(r, "names"), j, nm)
		{
			if (!json_is_string(nm) || strcmp(json_string_value(nm), name))
				continue;
			if (!act || strcmp(act, "SCMP_ACT_ALLOW"))
				return 0; /* the base has its own say: left to it */
			json_t *args = json_object_get(r, "args");
			found = json_array_size(args) ? 2 : 1;
		}
	}
	return found;
}

/* The base's rules, name by name: a notified name leaves its ALLOW rules;
 * a conditional ALLOW of it becomes NOTIFY with the same conditions. */
static void rewrite_base(json_t *rules, const struct needs *n, json_t *out)
{
	size_t i, j;
	json_t *r, *nm;
	json_array_foreach(rules, i, r)
	{
		const char *act = json_string_value(json_object_get(r, "action"));
		bool allow = act && !strcmp(act, "SCMP_ACT_ALLOW");
		bool conditional = json_array_size(json_object_get(r, "args")) > 0;
		json_t *keep = json_array(), *notify = json_array();
		json_array_foreach(json_object_get(r, "names"), j, nm)
		{
			enum mv_sc sc = json_is_string(nm) ? syscalls_by_name(json_string_value(nm))
							   : MV_SC_UNKNOWN;
			if (!allow || sc == MV_SC_UNKNOWN || wanted(n, sc) == 0)
				json_array_append(keep, nm);
			else if (conditional)
				json_array_append(notify, nm);
		}
		if (json_array_size(keep)) {
			json_t *copy = json_deep_copy(r);
			json_object_set_new(copy, "names", keep);
			json_array_append_new(out, copy);
		} else {
			json_decref(keep);
		}
		if (json_array_size(notify)) {
			json_t *copy = json_deep_copy(r);
			json_object_set_new(copy, "names", notify);
			json_object_set_new(copy, "action", json_string("SCMP_ACT_NOTIFY"));
			json_array_append_new(out, copy);
		} else {
			json_decref(notify);
		}
	}
}

static void add_notify_rules(const struct needs *n, const json_t *rules, bool default_allow,
			     json_t *out)
{
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		int want = wanted(n, (enum mv_sc)sc);
		const char *name = syscalls_name((enum mv_sc)sc);
		int base = want ? base_allows(rules, name, default_allow) : 0;
		if (base != 1)
			continue; /* not wanted, denied, or conditional (rewrite_base) */
		const struct needs_sc *s = &n->sc[MV_ABI_X86_64][sc];
		if (want == 2) {
			json_array_append_new(out, notify_rule(name, NULL));
			continue;
		}
		for (size_t i = 0; i < s->n; i++)
			json_array_append_new(out, notify_rule(name, term_args(&s->t[i])));
	}
}

json_t *ociprofile_build(const struct needs *n, const json_t *base, const char *listener,
			 const char *metadata, struct mv_err *err)
{
	if (base &&
	    (!json_is_object(base) || !json_is_string(json_object_get(base, "defaultAction")))) {
		mv_err_set(err, -EINVAL, NULL,
			   "the base profile is not a seccomp profile (no defaultAction)");
		return NULL;
	}
	json_t *prof =
	    base ? json_deep_copy(base)
		 : json_pack("{s:s, s:[sss]}", "defaultAction", "SCMP_ACT_ALLOW", "architectures",
			     "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32");
	const char *def = json_string_value(json_object_get(prof, "defaultAction"));
	bool default_allow = def && !strcmp(def, "SCMP_ACT_ALLOW");
	json_t *rules = json_object_get(prof, "syscalls");
	json_t *empty = json_array();
	if (!json_is_array(rules))
		rules = empty;
	json_t *out = json_array();
	rewrite_base(rules, n, out);
	add_notify_rules(n, rules, default_allow, out);
	if (needs_refuse_io_uring(n))
		json_array_append_new(out,
				      json_pack("{s:[sss], s:s, s:i}", "names", "io_uring_setup",
						"io_uring_enter", "io_uring_register", "action",
						"SCMP_ACT_ERRNO", "errnoRet", 1));
	json_decref(empty);
	json_object_set_new(prof, "syscalls", out);
	json_object_set_new(prof, "listenerPath", json_string(listener));
	if (metadata)
		json_object_set_new(prof, "listenerMetadata", json_string(metadata));
	return prof;
}
