/* Command-line options from tables.
 *
 * cli_parse hands getopt_long one option array made from every table:
 * an option with a short name returns it, a long-only one returns 256
 * plus its index over all the tables, which is how a value finds its row
 * again. getopt_long permutes argv (glibc) so that operands may come
 * before options; optind = 0 makes it start afresh, since an earlier
 * scan of the same argv (ctl's own options, in order) leaves state that
 * optind = 1 does not reset. */
#include "supervisor/cli/options.h"
#include "common/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An optional value ("[=MODE]") is written against the name: it must
 * be given with '='. */
static void print_row(FILE *f, int short_name, const char *name, const char *arg, const char *help)
{
	char left[64];
	const char *sep = !arg ? "" : arg[0] == '[' ? "" : " ";
	if (short_name > 0 && short_name < 256)
		snprintf(left, sizeof(left), "-%c, --%s%s%s", short_name, name, sep,
			 arg ? arg : "");
	else
		snprintf(left, sizeof(left), "    --%s%s%s", name, sep, arg ? arg : "");
	cli_print_row(f, left, help);
}

void cli_print_row(FILE *f, const char *left, const char *help)
{
	/* The help in words to column 80, continued at column 33 (on a line
	 * of its own after a long left part). */
	enum { COL = 33, WIDTH = 80 };
	int col = fprintf(f, "  %-30s ", left);
	if (col > COL)
		col = fprintf(f, "\n%*s", COL, "") - 1;
	const char *w = help;
	bool first = true;
	while (*w) {
		size_t n = strcspn(w, " ");
		if (!first && col + 1 + (int)n > WIDTH)
			col = fprintf(f, "\n%*s", COL, "") - 1;
		else if (!first)
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", (int)n, w);
		first = false;
		w += n;
		while (*w == ' ')
			w++;
	}
	fprintf(f, "\n");
}

void cli_print_args(FILE *f, const struct cli_arg *args, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (args[i].name && args[i].help)
			print_row(f, args[i].short_name, args[i].name, args[i].arg, args[i].help);
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

/* ---- values ----------------------------------------------------------- */

/* Each reader returns 0 with *v set, -EINVAL when s is not what the kind
 * says (why may say more), or another -errno about s. */

static int read_flag(const char *s, json_t **v, char *why, size_t n)
{
	*v = json_true();
	return 0;
}

static int read_string(const char *s, json_t **v, char *why, size_t n)
{
	*v = json_string(s);
	return *v ? 0 : -EINVAL; /* not UTF-8 */
}

/* The supervisor has its own working directory. */
static int read_path(const char *s, json_t **v, char *why, size_t n)
{
	if (s[0] == '/')
		return read_string(s, v, why, n);
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return -errno;
	_cleanup_free_ char *abs = xmalloc(strlen(cwd) + strlen(s) + 2);
	sprintf(abs, "%s/%s", cwd, s);
	return read_string(abs, v, why, n);
}

static int read_realpath(const char *s, json_t **v, char *why, size_t n)
{
	_cleanup_free_ char *abs = realpath(s, NULL);
	if (!abs)
		return -errno;
	return read_string(abs, v, why, n);
}

static int read_id(const char *s, json_t **v, char *why, size_t n)
{
	char *end;
	long long id = strtoll(s, &end, 10);
	if (!*s || *end || id <= 0)
		return -EINVAL;
	*v = json_integer((json_int_t)id);
	return 0;
}

static int read_seconds(const char *s, json_t **v, char *why, size_t n)
{
	int ms;
	if (cli_parse_seconds_ms(s, &ms) < 0)
		return -EINVAL;
	*v = json_integer(ms);
	return 0;
}

static int read_seconds_nonzero(const char *s, json_t **v, char *why, size_t n)
{
	int ms;
	if (cli_parse_seconds_ms(s, &ms) < 0 || ms < 1)
		return -EINVAL;
	*v = json_integer(ms);
	return 0;
}

static int read_size(const char *s, json_t **v, char *why, size_t n)
{
	uint64_t size;
	if (mv_parse_size(s, &size) < 0 || size > INT64_MAX)
		return -EINVAL;
	*v = json_integer((json_int_t)size);
	return 0;
}

static int read_rate(const char *s, json_t **v, char *why, size_t n)
{
	char *end;
	double rate = strtod(s, &end);
	if (!*s || *end || !(rate >= 0) || !isfinite(rate))
		return -EINVAL;
	*v = json_real(rate);
	return 0;
}

static int read_json_object(const char *s, json_t **v, char *why, size_t n)
{
	json_error_t e;
	*v = json_loads(s, 0, &e);
	if (*v && json_is_object(*v))
		return 0;
	snprintf(why, n, "%s", *v ? "not an object" : e.text);
	json_decref(*v);
	return -EINVAL;
}

/* s is NULL when the option came without its optional value. */
static int read_json_mode(const char *s, json_t **v, char *why, size_t n)
{
	if (s && strcmp(s, "short") != 0 && strcmp(s, "pretty") != 0)
		return -EINVAL;
	*v = json_string(s ? s : "");
	return 0;
}

static const struct {
	int (*read)(const char *s, json_t **v, char *why, size_t n);
	const char *noun; /* what s is not, when read says -EINVAL */
} kinds[] = {
    [CLI_HELP] = {read_flag, ""},
    [CLI_FLAG] = {read_flag, ""},
    [CLI_STRING] = {read_string, "valid UTF-8"},
    [CLI_PATH] = {read_path, "valid UTF-8"},
    [CLI_REALPATH] = {read_realpath, "valid UTF-8"},
    [CLI_PID] = {read_id, "a process id"},
    [CLI_JOB] = {read_id, "a job id"},
    [CLI_SECONDS] = {read_seconds, "a number of seconds"},
    [CLI_SECONDS_NONZERO] = {read_seconds_nonzero, "a number of seconds"},
    [CLI_SIZE] = {read_size, "a size"},
    [CLI_RATE] = {read_rate, "a number of MB/s"},
    [CLI_JSON_OBJECT] = {read_json_object, "a JSON object"},
    [CLI_JSON_MODE] = {read_json_mode, "short or pretty"},
};

/* Check s as a's kind says and set it in out; -errno after a message. */
static int store(const char *prog, const struct cli_arg *a, const char *s, json_t *out)
{
	json_t *v = NULL;
	char why[256] = "";
	int rc = kinds[a->kind].read(s, &v, why, sizeof(why));
	if (rc == -EINVAL)
		fprintf(stderr, "%s: %s%s%s'%s' is not %s%s%s\n", prog, a->name ? "--" : "",
			a->name ? a->name : "", a->name ? ": " : "", s, kinds[a->kind].noun,
			*why ? ": " : "", why);
	else if (rc < 0)
		fprintf(stderr, "%s: %s: %s\n", prog, s, strerror(-rc));
	if (rc < 0)
		return rc;
	if (!(a->flags & CLI_MANY)) {
		json_object_set_new(out, a->key, v);
		return 0;
	}
	json_t *list = json_object_get(out, a->key);
	if (!list)
		json_object_set_new(out, a->key, list = json_array());
	json_array_append_new(list, v);
	return 0;
}

/* ---- parsing ---------------------------------------------------------- */

enum { MAX_OPTS = 64 };

/* One getopt_long option per option row of every table. */
struct optmap {
	struct option longopts[MAX_OPTS + 1];
	char shortopts[3 * MAX_OPTS + 3];
	const struct cli_arg *arg[MAX_OPTS];
	json_t *out[MAX_OPTS];
	size_t n;
};

static void optmap_build(struct optmap *m, const struct cli_table *t, size_t nt, bool in_order)
{
	char *s = m->shortopts;
	if (in_order)
		*s++ = '+';
	*s++ = ':';
	m->n = 0;
	for (size_t k = 0; k < nt; k++)
		for (size_t i = 0; i < t[k].n; i++) {
			const struct cli_arg *a = &t[k].args[i];
			if (!a->name || m->n == MAX_OPTS)
				continue;
			int has_arg = a->kind <= CLI_FLAG	 ? no_argument
				      : a->kind == CLI_JSON_MODE ? optional_argument
								 : required_argument;
			int val = a->short_name ? a->short_name : 256 + (int)m->n;
			m->longopts[m->n] = (struct option){a->name, has_arg, NULL, val};
			m->arg[m->n] = a;
			m->out[m->n++] = t[k].out;
			if (a->short_name) {
				*s++ = (char)a->short_name;
				if (has_arg != no_argument)
					*s++ = ':';
				if (has_arg == optional_argument)
					*s++ = ':';
			}
		}
	*s = '\0';
	m->longopts[m->n] = (struct option){0, 0, 0, 0};
}

/* The row getopt_long's answer ch stands for, or -1. */
static int optmap_find(const struct optmap *m, int ch)
{
	if (ch >= 256)
		return ch - 256 < (int)m->n ? ch - 256 : -1;
	for (size_t i = 0; i < m->n; i++)
		if (m->arg[i]->short_name == ch)
			return (int)i;
	return -1;
}

/* Whether word ("--name[=value]") spells a's long name, maybe abbreviated. */
static bool spells(const char *word, const struct cli_arg *a)
{
	size_t len = strcspn(word + 2, "=");
	return len && strncmp(word + 2, a->name, len) == 0;
}

/* Say what getopt_long refused: ch is '?' or ':'. optopt is the option's
 * value, 0 for an unknown long one. argv[optind - 1] is the word it was
 * reading, unless an unknown short option sits inside a cluster. */
static int refuse(const char *prog, const struct optmap *m, int ch, char **argv)
{
	const char *word = argv[optind - 1];
	int i = optopt ? optmap_find(m, optopt) : -1;
	char name[64];
	if (strncmp(word, "--", 2) == 0 && (!optopt || (i >= 0 && spells(word, m->arg[i]))))
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(word, "="), word);
	else
		snprintf(name, sizeof(name), "-%c", optopt);
	if (ch == ':')
		fprintf(stderr, "%s: option '%s' needs an argument\n", prog, name);
	else if (i >= 0)
		fprintf(stderr, "%s: option '%s' takes no argument\n", prog, name);
	else
		fprintf(stderr, "%s: unknown option '%s'\n", prog, name);
	return -EINVAL;
}

/* Give the operands to the tables' operand rows, in order. */
static int take_operands(const char *prog, const struct cli_table *t, size_t nt, int n,
			 char **words)
{
	int w = 0, rc;
	for (size_t k = 0; k < nt; k++)
		for (size_t i = 0; i < t[k].n; i++) {
			const struct cli_arg *a = &t[k].args[i];
			if (a->name)
				continue;
			if (w == n && !(a->flags & CLI_OPTIONAL)) {
				fprintf(stderr, "%s: no %s given\n", prog, a->arg);
				return -EINVAL;
			}
			int take = (a->flags & CLI_MANY) ? n - w : w < n;
			for (int j = 0; j < take; j++)
				if ((rc = store(prog, a, words[w++], t[k].out)) < 0)
					return rc;
		}
	if (w < n) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, words[w]);
		return -EINVAL;
	}
	return 0;
}

int cli_parse(const char *prog, const struct cli_table *t, size_t nt, int argc, char **argv,
	      int *rest)
{
	struct optmap m;
	optmap_build(&m, t, nt, rest != NULL);
	optind = 0;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, m.shortopts, m.longopts, NULL)) != -1) {
		int i = ch == '?' || ch == ':' ? -1 : optmap_find(&m, ch);
		if (i < 0)
			return refuse(prog, &m, ch, argv);
		if (m.arg[i]->kind == CLI_HELP)
			return CLI_HELP_ASKED;
		int rc = store(prog, m.arg[i], optarg, m.out[i]);
		if (rc < 0)
			return rc;
	}
	if (rest) {
		*rest = optind;
		return 0;
	}
	return take_operands(prog, t, nt, argc - optind, argv + optind);
}

const char *cli_synopsis(const struct cli_arg *args, size_t n, bool with_options, char *buf,
			 size_t len)
{
	size_t at = 0;
	bool options = false;
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		options |= args[i].name && args[i].kind != CLI_HELP;
	if (with_options && options)
		at += (size_t)snprintf(buf, len, " [OPTION]...");
	for (size_t i = 0; i < n && at < len; i++) {
		const struct cli_arg *a = &args[i];
		if (a->name)
			continue;
		bool opt = a->flags & CLI_OPTIONAL;
		at += (size_t)snprintf(buf + at, len - at, " %s%s%s%s", opt ? "[" : "", a->arg,
				       opt ? "]" : "", a->flags & CLI_MANY ? "..." : "");
	}
	return buf;
}

bool cli_flag(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

const char *cli_string(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

enum cli_json cli_json_mode(json_t *o, const char *key, enum cli_json dflt)
{
	const char *s = cli_string(o, key);
	if (!s)
		return CLI_JSON_OFF;
	if (!*s)
		return dflt;
	return strcmp(s, "pretty") == 0 ? CLI_JSON_PRETTY : CLI_JSON_SHORT;
}

void cli_json_print(FILE *f, json_t *v, enum cli_json mode)
{
	/* Keys in the object's own order: the replies put what matters
	 * first, and a policy's canonical form has its order. */
	size_t flags = JSON_ENCODE_ANY;
	flags |= mode == CLI_JSON_PRETTY ? JSON_INDENT(2) : JSON_COMPACT;
	char *s = json_dumps(v, flags);
	fprintf(f, "%s\n", s ? s : "null");
	free(s);
}

void cli_json_freep(json_t **o)
{
	json_decref(*o);
}

int cli_metrics_interval(json_t *v, const char *prog, int *ms)
{
	const char *interval = cli_string(v, "metrics_interval");
	*ms = 5000;
	if (interval && !cli_string(v, "metrics_file")) {
		fprintf(stderr, "%s: --metrics-interval needs --metrics-file\n", prog);
		return -EINVAL;
	}
	if (interval && (cli_parse_seconds_ms(interval, ms) < 0 || *ms < 100)) {
		fprintf(stderr,
			"%s: --metrics-interval: '%s' is not a number of seconds of at least 0.1\n",
			prog, interval);
		return -EINVAL;
	}
	return 0;
}
