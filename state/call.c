#include "state/call.h"

uint64_t call_bytes_asked(const struct mv_call *c, uint64_t *brk_cur)
{
	switch (c->sc) {
	case MV_SC_mmap:
		/* The i386 mmap (old_mmap) takes its arguments in memory. */
		return c->abi == MV_ABI_I386 ? 0 : c->args[1];
	case MV_SC_mmap2:
		return c->args[1];
	case MV_SC_mremap:
		return c->args[2];
	case MV_SC_brk: {
		uint64_t want = c->args[0], grew = 0;
		if (want == 0)
			return 0;
		if (*brk_cur && want > *brk_cur)
			grew = want - *brk_cur;
		*brk_cur = want;
		return grew;
	}
	default:
		return 0;
	}
}
