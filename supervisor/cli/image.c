/* memvisor image: look at a checkpoint image without a supervisor.
 *
 *   memvisor image info [--json] DIR     a summary
 *   memvisor image verify [--json] DIR   every checksum and the manifest
 *
 * Exit status: 0 good, 1 a bad image (the message names the first bad
 * part), 2 usage. */
#include "supervisor/cli/image.h"
#include "common/util.h"
#include "supervisor/cli/options.h"
#include "supervisor/image/read.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_GOOD = 0, EXIT_BAD = 1, EXIT_USAGE = 2 };

static const struct cli_arg image_args[] = {
    {.arg = "COMMAND", .kind = CLI_STRING, .key = "command"},
    {.arg = "DIR", .kind = CLI_STRING, .key = "dir"},
    {.name = "json",
     .short_name = 'j',
     .arg = "[=MODE]",
     .kind = CLI_JSON_MODE,
     .key = "json",
     .help = "print the result as JSON: short (one line, the default) or pretty"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

static void synopsis(FILE *f)
{
	fprintf(f, "Usage: memvisor image info [OPTION]... DIR\n"
		   "       memvisor image verify [OPTION]... DIR\n");
}

static void usage(FILE *f)
{
	synopsis(f);
	fprintf(f, "Summarise a checkpoint image, or check every checksum in it.\n\n");
	cli_print_args(f, image_args, ARRAY_SIZE(image_args));
	fprintf(f, "\nExit status: 0 good, 1 bad image, 2 usage.\n");
}

static const char *human(uint64_t b, char *buf, size_t len)
{
	return mv_human_size(b, buf, len);
}

static void print_cmdline(const struct img_proc *p, int width)
{
	int used = 0;
	for (size_t at = 0; at < p->cmdline_len && used < width;) {
		size_t n = strnlen(p->cmdline + at, p->cmdline_len - at);
		used += printf("%s%.*s", at ? " " : "", (int)n, p->cmdline + at);
		at += n + 1;
	}
	if (!p->cmdline_len)
		printf("%s", p->exe ? p->exe : "?");
}

static uint64_t proc_bytes(const struct img_proc *p)
{
	uint64_t b = 0;
	for (size_t k = 0; k < p->n_r; k++)
		for (size_t x = 0; x < p->r[k].ext.n; x++)
			b += img_extent_len(&p->r[k].ext.v[x]);
	return b;
}

static uint64_t proc_committed(const struct img_proc *p)
{
	uint64_t b = 0;
	for (size_t k = 0; k < p->n_r; k++)
		b += p->r[k].committed;
	return b;
}

static void info_text(const char *dir, const struct imgread *r)
{
	const struct img *im = &r->im;
	const struct img_totals *t = &im->recorded;
	char a[32], b[32], c[32];
	char when[64] = "?";
	time_t secs = (time_t)(im->created_ns / 1000000000ull);
	struct tm tm;
	if (localtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("image:     %s\n", dir);
	printf("format:    %s %u, id %s\n", IMG_FORMAT, im->version, im->id);
	printf("created:   %s by memvisor %s on %s (%s)\n", when, im->memvisor, im->kernel,
	       im->arch);
	printf("pause:     %.1f ms\n", (double)im->pause_ns / 1e6);
	/* Not a snapshot for new processes (CRIU's sense of the word). */
	if (im->sup_pid > 0)
		printf("reloads:   only into these processes, by memvisor pid %d%s%s%s\n",
		       im->sup_pid, im->sup_name[0] ? " (-n " : "", im->sup_name,
		       im->sup_name[0] ? ")" : "");
	else
		printf("reloads:   only into these processes, by the memvisor that took it\n");
	uint64_t stored = img_stored_bytes(im);
	printf("size:      %s of pages (%s of data), %s of manifest\n",
	       human(im->pages_size, a, sizeof(a)), human(t->data_bytes, b, sizeof(b)),
	       human(r->manifest_size, c, sizeof(c)));
	if (stored < t->data_bytes)
		printf(
		    "shared:    %s of the data stored once for several processes (copy-on-write)\n",
		    human(t->data_bytes - stored, a, sizeof(a)));
	printf("contents:  %zu %s (%zu gone), %zu %s, %zu %s, %zu %s, %zu shared %s\n",
	       t->processes, mv_plural((long long)t->processes, "process", "processes"), t->gone,
	       t->threads, mv_plural((long long)t->threads, "thread", "threads"), t->regions,
	       mv_plural((long long)t->regions, "region", "regions"), t->extents,
	       mv_plural((long long)t->extents, "extent", "extents"), t->objects,
	       mv_plural((long long)t->objects, "object", "objects"));
	printf("by kind:  ");
	for (int k = 0; k < AS_KIND_COUNT; k++)
		if (t->by_kind[k])
			printf(" %s %s", as_kind_name((enum as_kind)k),
			       human(t->by_kind[k], a, sizeof(a)));
	printf("\n\n%7s %7s %4s %7s %10s %10s %9s  %s\n", "PID", "PPID", "THR", "REGIONS", "IMAGE",
	       "COMMITTED", "PAUSE", "COMMAND");
	for (size_t i = 0; i < im->n_p; i++) {
		const struct img_proc *p = &im->p[i];
		if (p->gone) {
			printf("%7d %7s %4s %7s %10s %10s %9s  (gone)\n", p->pid, "-", "-", "-",
			       "-", "-", "-");
			continue;
		}
		printf("%7d %7d %4zu %7zu %10s %10s %6.1f ms  ", p->pid, p->ppid, p->n_t, p->n_r,
		       human(proc_bytes(p), a, sizeof(a)), human(proc_committed(p), b, sizeof(b)),
		       (double)p->pause_ns / 1e6);
		print_cmdline(p, 50);
		printf("\n");
	}
	if (!im->n_o)
		return;
	printf("\n%3s %10s %10s %-9s %-6s %s\n", "OBJ", "IMAGE", "SIZE", "SOURCE", "COVER", "PATH");
	for (size_t k = 0; k < im->n_o; k++) {
		const struct img_object *o = &im->o[k];
		uint64_t bytes = 0;
		for (size_t x = 0; x < o->ext.n; x++)
			bytes += img_extent_len(&o->ext.v[x]);
		printf("%3zu %10s %10s %-9s %-6s %s\n", k, human(bytes, a, sizeof(a)),
		       human(o->size, b, sizeof(b)), o->source, img_coverage_name(o->coverage),
		       o->path ? o->path : "");
	}
}

static json_t *info_json(const char *dir, const struct imgread *r)
{
	const struct img *im = &r->im;
	const struct img_totals *t = &im->recorded;
	json_t *kinds = json_object(), *procs = json_array();
	for (int k = 0; k < AS_KIND_COUNT; k++)
		if (t->by_kind[k])
			json_object_set_new(kinds, as_kind_name((enum as_kind)k),
					    json_integer((json_int_t)t->by_kind[k]));
	for (size_t i = 0; i < im->n_p; i++) {
		const struct img_proc *p = &im->p[i];
		json_array_append_new(
		    procs,
		    json_pack("{s:i, s:i, s:s, s:I, s:I, s:I, s:I, s:I}", "pid", p->pid, "ppid",
			      p->ppid, "state", p->gone ? "gone" : "dumped", "threads",
			      (json_int_t)p->n_t, "regions", (json_int_t)p->n_r, "bytes",
			      (json_int_t)proc_bytes(p), "committed", (json_int_t)proc_committed(p),
			      "pause_ns", (json_int_t)p->pause_ns));
	}
	json_t *o = json_pack(
	    "{s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
	    "s:o}",
	    "dir", dir, "id", im->id, "version", (int)im->version, "memvisor", im->memvisor,
	    "created_ns", (json_int_t)im->created_ns, "pause_ns", (json_int_t)im->pause_ns,
	    "pages_size", (json_int_t)im->pages_size, "manifest_size", (json_int_t)r->manifest_size,
	    "processes", (json_int_t)t->processes, "threads", (json_int_t)t->threads, "regions",
	    (json_int_t)t->regions, "extents", (json_int_t)t->extents, "objects",
	    (json_int_t)t->objects, "data_bytes", (json_int_t)t->data_bytes, "stored_bytes",
	    (json_int_t)img_stored_bytes(im), "committed", (json_int_t)t->committed, "by_kind",
	    kinds, "process_list", procs);
	json_object_set_new(o, "supervisor",
			    im->sup_pid > 0 ? json_pack("{s:i, s:s?}", "pid", im->sup_pid, "name",
							im->sup_name[0] ? im->sup_name : NULL)
					    : json_null());
	return o;
}

static void print_json(json_t *o, enum cli_json mode)
{
	cli_json_print(stdout, o, mode);
	json_decref(o);
}

/* A directory without a manifest is no image: say that, rather than what
 * the first file read of it found missing (its pages file). 0, or
 * EXIT_BAD after saying why. */
static int require_image(const char *dir)
{
	struct mv_err err = {0};
	if (imgread_require(dir, &err) < 0) {
		fprintf(stderr, "memvisor image: %s\n", err.msg);
		return EXIT_BAD;
	}
	return EXIT_GOOD;
}

static int cmd_info(const char *dir, enum cli_json json)
{
	struct imgread r;
	struct mv_err err = {0};
	int rc = imgread_open(dir, &r, &err);
	if (rc < 0) {
		fprintf(stderr, "memvisor image: %s: %s\n", dir, err.msg);
		imgread_close(&r);
		return EXIT_BAD;
	}
	if (json)
		print_json(info_json(dir, &r), json);
	else
		info_text(dir, &r);
	imgread_close(&r);
	return EXIT_GOOD;
}

static void on_progress(uint64_t done, uint64_t total, void *arg)
{
	if (!isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\rverifying: %3.0f%%",
		total ? 100.0 * (double)done / (double)total : 100.0);
	if (done == total)
		fprintf(stderr, "\r              \r");
}

static int cmd_verify(const char *dir, enum cli_json json)
{
	struct imgread r;
	struct mv_err err = {0};
	uint64_t t0 = mv_now_ns();
	int rc = imgread_open(dir, &r, &err);
	if (rc == 0)
		rc = imgread_verify(&r, on_progress, NULL, &err);
	uint64_t elapsed = mv_now_ns() - t0;
	if (json) {
		print_json(
		    rc == 0 ? json_pack("{s:s, s:b, s:I, s:I, s:I}", "dir", dir, "ok", 1, "extents",
					(json_int_t)r.im.recorded.extents, "bytes",
					(json_int_t)r.im.recorded.data_bytes, "elapsed_ns",
					(json_int_t)elapsed)
			    : json_pack("{s:s, s:b, s:s}", "dir", dir, "ok", 0, "error", err.msg),
		    json);
	} else if (rc == 0) {
		char a[32];
		printf("%s: ok: %zu %s, %s checked in %.2f s\n", dir, r.im.recorded.extents,
		       mv_plural((long long)r.im.recorded.extents, "extent", "extents"),
		       human(r.im.recorded.data_bytes, a, sizeof(a)), (double)elapsed / 1e9);
	}
	if (rc < 0)
		fprintf(stderr, "memvisor image: %s: %s\n", dir, err.msg);
	imgread_close(&r);
	return rc < 0 ? EXIT_BAD : EXIT_GOOD;
}

/* The first operand must be the command: `image DIR` would otherwise
 * take DIR for it and say "no DIR given". 0, or EXIT_USAGE after saying
 * what is wrong. */
static int check_command(int argc, char **argv)
{
	int i = 1;
	while (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0)
		i++;
	i += i < argc && strcmp(argv[i], "--") == 0;
	if (i >= argc || strcmp(argv[i], "info") == 0 || strcmp(argv[i], "verify") == 0)
		return 0;
	char q[4096];
	mv_shell_word(argv[i], q, sizeof(q));
	if (access(argv[i], F_OK) == 0)
		fprintf(stderr,
			"memvisor image: no command given before %s: `memvisor image info %s` or "
			"`memvisor image verify %s`\n",
			argv[i], q, q);
	else
		fprintf(stderr, "memvisor image: unknown command '%s' (info or verify)\n", argv[i]);
	synopsis(stderr);
	return EXIT_USAGE;
}

int image_main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (check_command(argc, argv))
		return EXIT_USAGE;
	_cleanup_json_ json_t *o = json_object();
	struct cli_table t = {image_args, ARRAY_SIZE(image_args), o};
	int rc = cli_parse("memvisor image", &t, 1, argc, argv, NULL);
	if (rc == CLI_HELP_ASKED) {
		usage(stdout);
		return EXIT_GOOD;
	}
	if (rc < 0) {
		synopsis(stderr);
		return EXIT_USAGE;
	}
	const char *sub = cli_string(o, "command"), *dir = cli_string(o, "dir");
	bool known = strcmp(sub, "info") == 0 || strcmp(sub, "verify") == 0;
	if (known && (rc = require_image(dir)) != EXIT_GOOD)
		return rc;
	enum cli_json json = cli_json_mode(o, "json", CLI_JSON_SHORT);
	if (strcmp(sub, "info") == 0)
		return cmd_info(dir, json);
	if (strcmp(sub, "verify") == 0)
		return cmd_verify(dir, json);
	return EXIT_USAGE; /* check_command said it */
}
