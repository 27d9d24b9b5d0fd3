/* libFuzzer harness: /proc text parsers (state/procparse.c, as_maps.c):
 * the same bytes as /proc/PID/status, /proc/PID/stat, /proc/PID/maps and
 * /proc/PID/smaps (the fork flags),
 * each NUL-terminated as the readers hand them over. */
#include "state/as.h"
#include "state/procparse.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	struct as_model m;
	as_model_init(&m);
	as_parse_maps(text, &m);
	as_model_free(&m);
	struct as_range *dc, *wf;
	size_t ndc, nwf;
	parse_fork_flags(text, &dc, &ndc, &wf, &nwf);
	free(dc);
	free(wf);
	free(text);
	return 0;
}
