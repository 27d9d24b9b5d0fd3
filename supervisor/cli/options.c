#include "supervisor/cli/options.h"
#include "common/util.h"

#include <math.h>
#include <string.h>

void cli_getopt_tables(const struct cli_opt *opts, size_t n, struct option *longopts,
		       char *shortopts)
{
	char *s = shortopts;
	*s++ = '+';
	*s++ = ':';
	for (size_t i = 0; i < n; i++) {
		longopts[i] = (struct option){opts[i].name, opts[i].has_arg, NULL, opts[i].val};
		if (opts[i].val > 0 && opts[i].val < 256) {
			*s++ = (char)opts[i].val;
			if (opts[i].has_arg == required_argument)
				*s++ = ':';
		}
	}
	*s = '\0';
	longopts[n] = (struct option){0, 0, 0, 0};
}

void cli_print_opts(FILE *f, const struct cli_opt *opts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char left[64];
		if (opts[i].val > 0 && opts[i].val < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", opts[i].val, opts[i].name,
				 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", opts[i].name,
				 opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
		fprintf(f, "  %-30s %s\n", left, opts[i].help);
	}
}

int cli_parse_seconds_ms(const char *s, int *ms)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0) || v > 86400.0)
		return -EINVAL;
	*ms = (int)lround(v * 1000.0);
	return 0;
}
