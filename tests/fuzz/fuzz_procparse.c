/* libFuzzer harness: the /proc text parsers (state/procparse.c, and
 * as_parse_maps in as_maps.c, which builds a model through the one maps
 * parser): the same bytes as /proc/PID/status, stat, statm, children,
 * fdinfo, maps (whole and over a range) and smaps (fork flags, Rss),
 * each NUL-terminated as the readers hand them over. */
#include "state/as.h"
#include "state/procparse.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touch every byte of the name, so that ASan sees a name past its text. */
static int walk_vma(void *arg, const struct proc_vma *v)
{
	size_t *sum = arg;
	for (size_t i = 0; i < v->name_len; i++)
		*sum += (unsigned char)v->name[i];
	return proc_vma_anon(v) && v->x ? 1 : 0;
}

static void fuzz_maps(const char *text)
{
	struct as_model m;
	as_model_init(&m);
	as_parse_maps(text, &m);
	as_apply_smaps_rss(text, &m);
	as_model_free(&m);
	size_t sum = 0;
	parse_maps(text, 0x1000, 0x7fffffffffff, walk_vma, &sum);
	struct as_range *dc, *wf;
	size_t ndc, nwf;
	parse_fork_flags(text, &dc, &ndc, &wf, &nwf);
	free(dc);
	free(wf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct proc_status st;
	parse_status(text, &st);
	struct proc_stat ps;
	parse_stat(text, &ps);
	uint64_t a, b;
	parse_statm(text, &a, &b);
	unsigned long flags;
	parse_fdinfo_flags(text, &flags);
	pid_t *pids = NULL;
	size_t n = 0, cap = 0;
	parse_pids(text, &pids, &n, &cap);
	free(pids);
	fuzz_maps(text);
	free(text);
	return 0;
}
