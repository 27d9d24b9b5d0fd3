#include "supervisor/cli/statsjson.h"
#include "common/fault.h"
#include "common/util.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/render.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *proc_json(const struct proc *p)
{
	json_t *o = json_object();
	json_object_set_new(o, "pid", json_integer(p->pid));
	json_object_set_new(o, "ppid", json_integer(p->ppid));
	json_object_set_new(o, "exe", p->exe ? json_string(p->exe) : json_null());
	json_object_set_new(o, "cmdline", render_cmdline(p));
	json_object_set_new(o, "execs", json_integer(p->execs));
	json_object_set_new(o, "start_ns", json_integer((json_int_t)p->seen_ns));
	json_object_set_new(o, "end_ns",
			    p->exit_ns ? json_integer((json_int_t)p->exit_ns) : json_null());
	json_object_set_new(o, "exit_status",
			    p->wait_status >= 0 ? json_integer(mv_exit_code(p->wait_status))
						: json_null());
	json_object_set_new(o, "stats", render_stats(&p->stats));
	return o;
}

static json_t *build(struct mv *mv, int exit_code)
{
	json_t *root = json_object();
	json_object_set_new(root, "memvisor_version", json_string(MV_VERSION));
	/* 2: times are integer nanoseconds (*_ns); 1 had seconds as reals. */
	json_object_set_new(root, "format", json_integer(2));
	json_t *cmd = json_array();
	for (int i = 0; i < mv->opts.argc; i++)
		json_array_append_new(cmd, json_string(mv->opts.argv[i]));
	json_object_set_new(root, "command", cmd);
	json_object_set_new(root, "exit_status", json_integer(exit_code));
	json_object_set_new(root, "socket",
			    mv->socket_path ? json_string(mv->socket_path) : json_null());
	json_object_set_new(root, "duration_ns",
			    json_integer((json_int_t)(mv_now_ns() - mv->start_ns)));

	json_t *procs, *totals;
	pthread_mutex_lock(&mv->lock);
	render_procs(&mv->procs, proc_json, &procs, &totals);
	json_object_set_new(root, "processes_seen", json_integer((json_int_t)mv->procs.n_seen));
	json_object_set_new(root, "processes_folded", json_integer((json_int_t)mv->procs.n_folded));
	json_object_set_new(root, "notifications", json_integer((json_int_t)mv->notifications));
	pthread_mutex_unlock(&mv->lock);
	json_object_set_new(root, "totals", totals);
	json_object_set_new(root, "processes", procs);
	json_t *u = enforce_uncounted(mv);
	if (u)
		json_object_set_new(root, "uncounted", u);
	return root;
}

int statsjson_check(const char *path)
{
	struct stat st;
	int rc = 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
	} else {
		_cleanup_free_ char *tmp = NULL;
		int fd = mv_create_beside(path, &tmp);
		if (fd < 0) {
			rc = fd;
		} else {
			close(fd);
			unlink(tmp);
		}
	}
	if (rc < 0)
		fprintf(stderr, "memvisor: cannot write --stats-json %s: %s\n", path,
			strerror(-rc));
	return rc;
}

int statsjson_write(struct mv *mv, const char *path, int exit_code)
{
	json_t *root = build(mv, exit_code);
	/* Written beside the target, then renamed over it: readers see the
	 * old file or the whole new one. The temporary name is made
	 * exclusively (mv_create_beside): a fixed PATH.tmp.PID let another
	 * user plant a symlink there and have root overwrite any file. */
	_cleanup_free_ char *tmp = NULL;
	int fd = fault_hit("statsjson_write") ? -ENOSPC : mv_create_beside(path, &tmp);
	int rc = 0;
	if (fd < 0) {
		rc = fd;
	} else {
		if (json_dumpfd(root, fd, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 ||
		    write(fd, "\n", 1) != 1)
			rc = errno ? -errno : -EIO;
		rc = mv_finish_beside(fd, tmp, path, rc);
	}
	json_decref(root);
	if (rc)
		fprintf(stderr, "memvisor: cannot write --stats-json %s: %s\n", path,
			strerror(-rc));
	return rc;
}
