/* memvisor ctl events: the stream and its filter (ctl_events.h). */
#include "supervisor/cli/ctl_events.h"
#include "common/syscalls.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>

const char ctl_event_types[] = "call, start, exec, exit, job, evict_unservable, dropped";

/* What an event must be to be shown. Empty sets let everything through. */
struct filter {
	pid_t *pids; /* --pid, and with --tree every process found in a tree */
	size_t n, cap;
	bool by_pid;	      /* --pid or --tree: only events of those processes */
	bool sc[MV_SC_COUNT]; /* --syscall */
	bool by_sc;	      /* only call events of those calls */
	json_t *types;	      /* --type: an array of type names, or NULL */
};

/* Call fn(word, arg) for each comma-separated word of each string of the
 * array list; stop at the first that returns non-zero and return it. */
static int each_word(json_t *list, int (*fn)(const char *w, void *arg), void *arg)
{
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		_cleanup_free_ char *copy = xstrdup(json_string_value(v));
		char *save = NULL;
		for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
			int rc = fn(w, arg);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int check_syscall(const char *w, void *arg)
{
	if (syscalls_by_name(w) != MV_SC_UNKNOWN)
		return 0;
	fprintf(stderr,
		"memvisor ctl: events: --syscall: '%s' is not a system call memvisor sees:", w);
	for (int sc = 0; sc < MV_SC_COUNT; sc++)
		fprintf(stderr, "%s %s", sc ? "," : "", syscalls_name((enum mv_sc)sc));
	fprintf(stderr, "\n");
	return -EINVAL;
}

static bool type_known(const char *w)
{
	size_t n = strlen(w);
	for (const char *p = ctl_event_types; (p = strstr(p, w)); p += n)
		if ((p == ctl_event_types || p[-1] == ' ') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

static int check_type(const char *w, void *arg)
{
	if (type_known(w))
		return 0;
	fprintf(stderr, "memvisor ctl: events: --type: '%s' is not an event type: %s\n", w,
		ctl_event_types);
	return -EINVAL;
}

int ctl_events_check(json_t *args)
{
	int rc = each_word(json_object_get(args, "syscalls"), check_syscall, NULL);
	if (rc == 0)
		rc = each_word(json_object_get(args, "types"), check_type, NULL);
	return rc;
}

/* ---- the filter --------------------------------------------------------- */

static bool has_pid(const struct filter *f, pid_t pid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->pids[i] == pid)
			return true;
	return false;
}

static void add_pid(struct filter *f, pid_t pid)
{
	if (has_pid(f, pid))
		return;
	if (f->n == f->cap)
		f->pids = xrealloc(f->pids, (f->cap = f->cap ? 2 * f->cap : 16) * sizeof(pid_t));
	f->pids[f->n++] = pid;
}

static int add_syscall(const char *w, void *arg)
{
	struct filter *f = arg;
	f->sc[syscalls_by_name(w)] = true;
	return 0;
}

static int add_type(const char *w, void *arg)
{
	json_array_append_new(arg, json_string(w));
	return 0;
}

/* Every running process below the roots already in f, from a ps reply:
 * descendants are added until a pass adds none (a child may be listed
 * before its parent). */
static void add_tree(struct filter *f, json_t *ps)
{
	json_t *procs = json_object_get(ps, "processes");
	for (size_t before = 0; before != f->n;) {
		before = f->n;
		size_t i;
		json_t *p;
		json_array_foreach(procs, i, p)
		{
			pid_t pid = (pid_t)json_integer_value(json_object_get(p, "pid"));
			pid_t ppid = (pid_t)json_integer_value(json_object_get(p, "ppid"));
			if (has_pid(f, ppid))
				add_pid(f, pid);
		}
	}
}

/* Is pid one of the processes of a ps reply? */
static bool listed(json_t *ps, pid_t pid)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(ps, "processes"), i, p)
	{
		if (json_integer_value(json_object_get(p, "pid")) == pid)
			return true;
	}
	return false;
}

/* Every process --pid and --tree name must be running under this
 * memvisor: a filter on any other would show nothing, forever.
 * CTL_EXIT_REPLY after saying which is not (and the ps to run, with the
 * options sel that chose the supervisor). */
static int check_listed(json_t *ps, json_t *args, const char *sel)
{
	static const char *const keys[] = {"pids", "trees"};
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		size_t i;
		json_t *v;
		json_array_foreach(json_object_get(args, keys[k]), i, v)
		{
			pid_t pid = (pid_t)json_integer_value(v);
			if (listed(ps, pid))
				continue;
			fprintf(stderr,
				"memvisor ctl: events: process %d is not running under this "
				"memvisor (see memvisor ctl %sps)\n",
				pid, sel);
			return CTL_EXIT_REPLY;
		}
	}
	return CTL_EXIT_OK;
}

/* Fill f from args; with --pid or --tree, ask c for the processes running
 * now (sel: the options that chose the supervisor, for a hint). */
static int filter_init(struct filter *f, json_t *args, struct ctl_conn *c, const char *sel)
{
	size_t i;
	json_t *v;
	memset(f, 0, sizeof(*f));
	json_array_foreach(json_object_get(args, "pids"), i, v)
	    add_pid(f, (pid_t)json_integer_value(v));
	json_array_foreach(json_object_get(args, "trees"), i, v)
	    add_pid(f, (pid_t)json_integer_value(v));
	f->by_pid = f->n > 0;
	each_word(json_object_get(args, "syscalls"), add_syscall, f);
	for (int sc = 0; sc < MV_SC_COUNT; sc++)
		f->by_sc |= f->sc[sc];
	if (json_object_get(args, "types")) {
		f->types = json_array();
		each_word(json_object_get(args, "types"), add_type, f->types);
	}
	if (!f->by_pid)
		return CTL_EXIT_OK;
	/* Before subscribing: a process of a tree that starts in between is
	 * found by its exec or exit event, which names its parent. */
	json_t *ps = NULL;
	int rc = ctl_conn_call(c, "ps", NULL, &ps);
	if (rc == CTL_EXIT_OK)
		rc = check_listed(ps, args, sel);
	if (rc == CTL_EXIT_OK && json_array_size(json_object_get(args, "trees")))
		add_tree(f, ps);
	json_decref(ps);
	return rc;
}

/* Does the event pass? A --tree grows with the processes started in it
 * (any event that names a parent in the tree). */
static bool filter_pass(struct filter *f, json_t *e, bool tree)
{
	const char *type = json_string_value(json_object_get(e, "event"));
	if (!type)
		return false;
	if (strcmp(type, "dropped") == 0)
		return true; /* about this reader: always said */
	json_t *ppid = json_object_get(e, "ppid"), *pid = json_object_get(e, "pid");
	if (tree && json_is_integer(ppid) && json_is_integer(pid) &&
	    has_pid(f, (pid_t)json_integer_value(ppid)))
		add_pid(f, (pid_t)json_integer_value(pid));
	if (f->types) {
		bool listed = false;
		size_t i;
		json_t *t;
		json_array_foreach(f->types, i, t) listed |=
		    strcmp(json_string_value(t), type) == 0;
		if (!listed)
			return false;
	} else if (f->by_sc && strcmp(type, "call") != 0) {
		return false; /* --syscall alone: calls only */
	}
	if (f->by_sc && strcmp(type, "call") == 0) {
		enum mv_sc sc = syscalls_by_name(json_string_value(json_object_get(e, "syscall")));
		if (sc == MV_SC_UNKNOWN || !f->sc[sc])
			return false;
	}
	if (f->by_pid && (!json_is_integer(pid) || !has_pid(f, (pid_t)json_integer_value(pid))))
		return false;
	return true;
}

int ctl_events_follow(struct ctl_conn *c, json_t *args, enum cli_json json,
		      const struct ctl_show_opts *o)
{
	struct filter f;
	int rc = filter_init(&f, args, c, o->selector);
	json_t *res;
	if (rc == CTL_EXIT_OK)
		rc = ctl_conn_call(c, "events", NULL, &res);
	if (rc) {
		free(f.pids);
		json_decref(f.types);
		return rc;
	}
	/* Calls decided in the kernel raise no event: say so once. */
	if (!json && o->legend)
		ctl_show_uncounted(stderr, json_object_get(res, "uncounted"), UNCOUNTED_EVENTS);
	json_decref(res);
	bool tree = json_array_size(json_object_get(args, "trees")) > 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		json_t *e = ctl_conn_read(c, true);
		if (!e)
			break; /* the supervisor exited */
		if (!filter_pass(&f, e, tree))
			;
		else if (json)
			cli_json_print(stdout, e, json);
		else
			ctl_show_event(e, o);
		json_decref(e);
	}
	free(f.pids);
	json_decref(f.types);
	return CTL_EXIT_OK;
}
