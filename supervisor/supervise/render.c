#include "supervisor/supervise/render.h"
#include "common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

json_t *render_hex(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_string(buf);
}

const char *render_prot(uint64_t prot, char buf[4])
{
	buf[0] = prot & PROT_READ ? 'r' : '-';
	buf[1] = prot & PROT_WRITE ? 'w' : '-';
	buf[2] = prot & PROT_EXEC ? 'x' : '-';
	buf[3] = '\0';
	return buf;
}

static bool is_pointer_arg(const char *name, size_t len)
{
	static const char *const ptrs[] = {"addr",  "old_address", "new_address", "shmaddr",
					   "stack", "parent_tid",  "child_tid",	  "tls",
					   "uargs", "filename",	   "pathname",	  "argv",
					   "envp",  "name",	   "iovec",	  "ptr"};
	for (size_t i = 0; i < ARRAY_SIZE(ptrs); i++)
		if (strlen(ptrs[i]) == len && memcmp(ptrs[i], name, len) == 0)
			return true;
	return false;
}

json_t *render_call_args(const struct mv_call *c)
{
	json_t *o = json_object();
	const char *names = syscalls_arg_names(c->sc);
	int i = 0;
	for (const char *p = names; *p && i < 6; i++) {
		const char *end = strchrnul(p, ',');
		size_t len = (size_t)(end - p);
		char key[32];
		snprintf(key, sizeof(key), "%.*s", (int)len, p);
		uint64_t v = c->args[i];
		if (c->abi == MV_ABI_I386)
			v &= 0xffffffffu;
		json_t *val;
		if (is_pointer_arg(p, len)) {
			val = render_hex(v);
		} else if (strcmp(key, "prot") == 0) {
			char buf[4];
			val = json_string(render_prot(v, buf));
		} else if (strcmp(key, "fd") == 0 || strcmp(key, "dirfd") == 0) {
			val = json_integer((int)v);
		} else if (strcmp(key, "flags") == 0 || strcmp(key, "shmflg") == 0) {
			val = render_hex(v);
		} else {
			val = json_integer((json_int_t)v);
		}
		json_object_set_new(o, key, val);
		p = *end ? end + 1 : end;
	}
	return o;
}

json_t *render_cmdline(const struct proc *p)
{
	json_t *a = json_array();
	if (!p->cmdline)
		return a;
	for (size_t off = 0; off < p->cmdline_len;) {
		const char *s = p->cmdline + off;
		size_t n = strnlen(s, p->cmdline_len - off);
		json_array_append_new(a, json_stringn(s, n));
		off += n + 1;
	}
	return a;
}

json_t *render_hist(const struct hist *h)
{
	json_t *o = json_object();
	json_object_set_new(o, "count", json_integer((json_int_t)h->count));
	json_object_set_new(o, "mean",
			    json_integer(h->count ? (json_int_t)(h->sum / h->count) : 0));
	json_object_set_new(o, "p50", json_integer((json_int_t)hist_quantile(h, 0.50)));
	json_object_set_new(o, "p99", json_integer((json_int_t)hist_quantile(h, 0.99)));
	json_object_set_new(o, "p999", json_integer((json_int_t)hist_quantile(h, 0.999)));
	json_object_set_new(o, "max", json_integer((json_int_t)h->max));
	return o;
}

json_t *render_stats(const struct proc_stats *s)
{
	json_t *o = json_object();
	json_t *calls = json_object();
	json_t *bytes = json_object();
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		json_t *by = NULL;
		for (int v = 0; v < MV_V_COUNT; v++) {
			if (!s->calls[sc][v])
				continue;
			if (!by)
				by = json_object();
			json_object_set_new(by, verdict_name((enum mv_verdict)v),
					    json_integer((json_int_t)s->calls[sc][v]));
		}
		if (by)
			json_object_set_new(calls, syscalls_name((enum mv_sc)sc), by);
		if (s->bytes[sc])
			json_object_set_new(bytes, syscalls_name((enum mv_sc)sc),
					    json_integer((json_int_t)s->bytes[sc]));
	}
	json_t *abi = json_object();
	for (int a = 0; a < MV_ABI_COUNT; a++)
		if (s->abi_calls[a])
			json_object_set_new(abi, syscalls_abi_name((enum mv_abi)a),
					    json_integer((json_int_t)s->abi_calls[a]));
	json_t *verdicts = json_object();
	for (int v = 0; v < MV_V_COUNT; v++)
		json_object_set_new(
		    verdicts, verdict_name((enum mv_verdict)v),
		    json_integer((json_int_t)stats_verdict_calls(s, (enum mv_verdict)v)));
	json_object_set_new(o, "total", json_integer((json_int_t)stats_total_calls(s)));
	json_object_set_new(o, "verdicts", verdicts);
	json_object_set_new(o, "calls", calls);
	json_object_set_new(o, "bytes", bytes);
	json_object_set_new(o, "abi", abi);
	json_object_set_new(o, "gone", json_integer((json_int_t)s->gone));
	json_object_set_new(o, "service_ns", render_hist(&s->service));
	return o;
}

void render_procs(struct proctab *t, json_t *(*one)(const struct proc *p), json_t **list,
		  json_t **totals)
{
	struct proc_stats *total = xcalloc(1, sizeof(*total));
	*list = json_array();
	struct proc *p;
	for (size_t i = 0; (p = proctab_next_all(t, &i));)
		json_array_append_new(*list, one(p));
	proctab_totals(t, total);
	*totals = render_stats(total);
	free(total);
}
