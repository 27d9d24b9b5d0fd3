#include "supervisor/cli/term.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

int term_width(int fd)
{
	if (!isatty(fd))
		return 0;
	const char *env = getenv("COLUMNS");
	if (env && *env) {
		char *end;
		long v = strtol(env, &end, 10);
		if (!*end && v > 0 && v < 100000)
			return (int)v;
	}
	struct winsize ws;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* The locale's character set, as setlocale(LC_CTYPE, "") would pick it
 * (memvisor does not set a locale: its own output is ASCII). */
static bool utf8_locale(void)
{
	static const char *const vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return strcasestr(v, "utf-8") || strcasestr(v, "utf8");
	}
	return false;
}

void term_put(FILE *f, const char *s, int width)
{
	size_t len = strlen(s);
	if (width <= 0) {
		fwrite(s, 1, len, f);
		return;
	}
	/* Characters: bytes that do not continue a UTF-8 sequence. */
	size_t chars = 0, cut = len;
	for (size_t i = 0; i < len; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (chars == (size_t)width - 1 && cut == len)
			cut = i;
		chars++;
	}
	if (chars <= (size_t)width) {
		fwrite(s, 1, len, f);
		return;
	}
	fwrite(s, 1, cut, f);
	fputs(utf8_locale() ? "\u2026" : "~", f);
}

void term_cut_begin(struct term_cut *t, int width)
{
	*t = (struct term_cut){.width = width};
	if (width <= 0)
		return;
	fflush(stdout);
	t->mem = open_memstream(&t->buf, &t->len);
	if (!t->mem)
		return;
	t->saved = stdout;
	stdout = t->mem;
}

void term_cut_end(struct term_cut *t)
{
	if (!t->mem)
		return;
	fclose(t->mem);
	stdout = t->saved;
	char *line = t->buf;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		term_put(stdout, line, t->width);
		if (!nl)
			break;
		fputc('\n', stdout);
		line = nl + 1;
	}
	free(t->buf);
	*t = (struct term_cut){0};
}
