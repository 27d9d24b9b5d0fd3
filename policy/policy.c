/* A parsed policy: its canonical JSON, and the questions every part of
 * memvisor asks it (does a rule match, is an executable exempt). */
#include "policy/policy.h"
#include "common/util.h"
#include "policy/callargs.h"
#include "policy/names.h"

#include <stdio.h>
#include <string.h>

static json_t *bits_json(enum names_family f, uint64_t bits)
{
	json_t *a = json_array();
	/* Single bits first, in table order, so that the output parses back. */
	for (int b = 0; b < 64 && bits; b++) {
		uint64_t bit = 1ULL << b;
		if (!(bits & bit))
			continue;
		/* SHARED|PRIVATE is SHARED_VALIDATE; the table knows. */
		const char *n = names_flag_name(f, bit);
		if (n) {
			json_array_append_new(a, json_string(n));
			bits &= ~bit;
		}
	}
	return a;
}

static json_t *rule_json(const struct pol_rule *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(r->name));
	json_t *sc = json_array();
	for (int i = 0; i < MV_SC_COUNT; i++)
		if (r->syscalls & (1ULL << i))
			json_array_append_new(sc, json_string(syscalls_name((enum mv_sc)i)));
	json_object_set_new(o, "syscalls", sc);
	if (r->has_prot) {
		json_object_set_new(o, "prot_has", bits_json(NAMES_PROT, r->prot_has));
		json_object_set_new(o, "prot_lacks", bits_json(NAMES_PROT, r->prot_lacks));
	}
	if (r->has_flags) {
		enum names_family f = NAMES_NONE;
		for (int i = 0; i < MV_SC_COUNT && f == NAMES_NONE; i++)
			if (r->syscalls & (1ULL << i))
				f = callargs_layout((enum mv_sc)i, MV_ABI_X86_64).family;
		json_object_set_new(o, "flags_has", bits_json(f, r->flags_has));
		json_object_set_new(o, "flags_lacks", bits_json(f, r->flags_lacks));
	}
	if (r->has_len) {
		json_object_set_new(o, "length_min", json_integer((json_int_t)r->len_min));
		/* UINT64_MAX does not fit a JSON integer: leave "no maximum" out. */
		if (r->len_max <= INT64_MAX)
			json_object_set_new(o, "length_max", json_integer((json_int_t)r->len_max));
	}
	if (r->backing != POL_BACKING_ANY)
		json_object_set_new(o, "backing",
				    json_string(r->backing == POL_BACKING_ANON ? "anon" : "file"));
	json_object_set_new(o, "action", json_string(verdict_name(r->action)));
	if (r->action == MV_V_DENY)
		json_object_set_new(o, "errno", json_string(names_errno_name(r->err)));
	return o;
}

static json_t *size_or_null(uint64_t v)
{
	return v ? json_integer((json_int_t)v) : json_null();
}

json_t *policy_to_json(const struct policy *p)
{
	static const char *const wx_names[] = {"off", "log", "deny"};
	json_t *o = json_object();
	json_object_set_new(o, "version", json_integer(1));
	if (p->description)
		json_object_set_new(o, "description", json_string(p->description));
	json_t *d = json_object();
	json_object_set_new(d, "action", json_string(verdict_name(p->dflt)));
	if (p->dflt == MV_V_DENY)
		json_object_set_new(d, "errno", json_string(names_errno_name(p->dflt_err)));
	json_object_set_new(o, "default", d);
	json_t *rules = json_array();
	for (size_t i = 0; i < p->n_rules; i++)
		json_array_append_new(rules, rule_json(&p->rules[i]));
	json_object_set_new(o, "rules", rules);
	/* null for "no limit": the canonical form names every key. A policy
	 * file leaves absent limits out instead. */
	json_t *lim = json_object();
	json_object_set_new(lim, "max_mapped", size_or_null(p->lim.max_mapped));
	json_object_set_new(lim, "max_mapped_tree", size_or_null(p->lim.max_mapped_tree));
	json_object_set_new(lim, "max_mapping", size_or_null(p->lim.max_mapping));
	json_object_set_new(lim, "max_regions", size_or_null(p->lim.max_regions));
	json_object_set_new(o, "limits", lim);
	json_object_set_new(o, "wx", json_string(wx_names[p->wx]));
	json_t *allow = json_array();
	for (size_t i = 0; i < p->n_wx_allow; i++)
		json_array_append_new(allow, json_string(p->wx_allow[i]));
	json_object_set_new(o, "wx_allow", allow);
	json_object_set_new(o, "wx_mdwe", json_boolean(p->wx_mdwe));
	return o;
}

bool policy_rule_matches(const struct pol_rule *r, const struct mv_call *c)
{
	uint64_t v;
	if (r->has_prot &&
	    (!callargs_prot(c, &v) || (v & r->prot_has) != r->prot_has || (v & r->prot_lacks)))
		return false;
	if (r->has_flags &&
	    (!callargs_flags(c, &v) || (v & r->flags_has) != r->flags_has || (v & r->flags_lacks)))
		return false;
	if (r->has_len && (!callargs_len(c, &v) || v < r->len_min || v > r->len_max))
		return false;
	if (r->backing != POL_BACKING_ANY) {
		if (!callargs_flags(c, &v))
			return false;
		bool anon = callargs_anon(c);
		if (anon != (r->backing == POL_BACKING_ANON))
			return false;
	}
	return true;
}

bool policy_wx_allowed(const struct policy *p, const char *exe)
{
	if (!exe)
		return false;
	for (size_t i = 0; i < p->n_wx_allow; i++)
		if (strcmp(p->wx_allow[i], exe) == 0 ||
		    (p->wx_allow_real[i] && strcmp(p->wx_allow_real[i], exe) == 0))
			return true;
	return false;
}

static bool rule_has_conditions(const struct pol_rule *r)
{
	return r->has_prot || r->has_flags || r->has_len || r->backing != POL_BACKING_ANY;
}

bool policy_needs_args(const struct policy *p, enum mv_sc sc)
{
	if (p->wx != POL_WX_OFF || p->lim.max_mapped || p->lim.max_mapped_tree ||
	    p->lim.max_mapping || p->lim.max_regions)
		return true;
	for (size_t i = 0; i < p->n_rules; i++)
		if ((p->rules[i].syscalls & (1ULL << sc)) && rule_has_conditions(&p->rules[i]))
			return true;
	return false;
}

int policy_runtime_gaps(const struct pol_launch_setup *launch, const struct policy *pol,
			struct mv_err *err)
{
	/* Only a refusing W^X relies on them: "log" refuses nothing. */
	if (pol->wx != POL_WX_DENY)
		return 0;
	const char *mem = launch->landlock_proc_mem
			      ? ""
			      : "writes to /proc/PID/mem (they ignore page protections; only "
				"Landlock set up at launch refuses them)";
	const char *rie = launch->rie_guarded
			      ? ""
			      : "a READ_IMPLIES_EXEC personality set before the change (it makes "
				"every readable mapping executable, and was not cleared at launch "
				"or was allowed since)";
	if (!*mem && !*rie)
		return 0;
	return mv_err_set(err, -EINVAL, MV_E_NOT_SUPPORTED,
			  "wx \"deny\" set at run time would leave open %s%s%s: start memvisor "
			  "with a policy that has \"wx\": \"deny\"",
			  mem, *mem && *rie ? ", and " : "", rie);
}
