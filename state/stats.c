#include "state/stats.h"

static const char *const verdict_names[MV_V_COUNT] = {"allow", "log", "deny", "kill"};

const char *verdict_name(enum mv_verdict v)
{
	return v < MV_V_COUNT ? verdict_names[v] : "unknown";
}

void stats_merge(struct proc_stats *dst, const struct proc_stats *src)
{
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		for (int v = 0; v < MV_V_COUNT; v++)
			dst->calls[sc][v] += src->calls[sc][v];
		dst->bytes[sc] += src->bytes[sc];
	}
	for (int a = 0; a < MV_ABI_COUNT; a++)
		dst->abi_calls[a] += src->abi_calls[a];
	dst->gone += src->gone;
	hist_merge(&dst->service, &src->service);
}

uint64_t stats_verdict_calls(const struct proc_stats *s, enum mv_verdict v)
{
	uint64_t n = 0;
	for (int sc = 0; sc < MV_SC_COUNT; sc++)
		n += s->calls[sc][v];
	return n;
}

uint64_t stats_total_calls(const struct proc_stats *s)
{
	uint64_t n = 0;
	for (int v = 0; v < MV_V_COUNT; v++)
		n += stats_verdict_calls(s, (enum mv_verdict)v);
	return n;
}
