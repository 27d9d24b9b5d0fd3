/* memvisor ctl: the command-line client of the control socket. Tables for
 * people, the raw result with --json for scripts.
 *
 * Exit status: 0 ok, 1 the supervisor answered with an error, 2 usage,
 * 3 cannot connect. */
#include "supervisor/cli/ctl.h"
#include "common/util.h"
#include "supervisor/cli/options.h"

#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

enum { EXIT_OK = 0, EXIT_REPLY = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

struct conn {
	int fd;
	char *buf; /* received bytes not yet returned as lines */
	size_t len, cap;
	int timeout_ms;
	bool gone;	/* memvisor closed the connection (EOF, reset, EPIPE) */
	bool quiet_eof; /* the caller says what that means (follow_job) */
};

struct client_opts {
	const char *socket;
	bool json;
	bool list;
	int timeout_ms;
};

/* ---- connecting ----------------------------------------------------- */

/* May a user trust what owner (a socket's, its directory's, its
 * listener's) says? Itself, or root. */
static bool owner_trusted(uid_t owner)
{
	return owner == geteuid() || owner == 0;
}

/* Before anything is sent: the socket and its directory must be ours (or
 * root's), and the directory closed to others unless sticky (/tmp). Else
 * another local user could have put a socket of theirs at a path we
 * trust (a runtime directory they created first) and would read our
 * requests. -EPERM with why filled when not. */
static int check_path(const char *path, char *why, size_t n)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, n, "%s is not a socket", path);
		return -EPERM;
	}
	if (!owner_trusted(st.st_uid)) {
		snprintf(why, n, "%s belongs to uid %u, not to you (uid %u)", path, st.st_uid,
			 geteuid());
		return -EPERM;
	}
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	if (stat(slash ? dir : ".", &st) < 0)
		return -errno;
	if (!owner_trusted(st.st_uid)) {
		snprintf(why, n, "its directory %s belongs to uid %u, not to you (uid %u)",
			 slash ? dir : ".", st.st_uid, geteuid());
		return -EPERM;
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		snprintf(why, n, "its directory %s (mode %04o) is writable by other users",
			 slash ? dir : ".", (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* A connection to path, or -errno (-EPERM with why filled when the socket
 * or what listens on it is not trusted). */
static int connect_path(const char *path, char *why, size_t n)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int rc = check_path(path, why, n);
	if (rc < 0)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	/* The path may have been swapped since it was checked: what
	 * listens is judged by its credentials (taken at listen()). */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !owner_trusted(cred.uid)) {
		snprintf(why, n, "%s is served by uid %u, not by you (uid %u)", path, cred.uid,
			 geteuid());
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The directories a memvisor of this user puts its sockets in. */
static size_t socket_dirs(char dirs[3][4096])
{
	size_t n = 0;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg)
		snprintf(dirs[n++], 4096, "%s/memvisor", xdg);
	if (geteuid() == 0)
		snprintf(dirs[n++], 4096, "/run/memvisor");
	else
		snprintf(dirs[n++], 4096, "/tmp/memvisor-%u", geteuid());
	return n;
}

/* Every socket in those directories that answers a connect. */
static char **live_sockets(size_t *count)
{
	char dirs[3][4096];
	size_t nd = socket_dirs(dirs), n = 0, cap = 8;
	char **v = xcalloc(cap, sizeof(*v));
	for (size_t d = 0; d < nd; d++) {
		DIR *dir = opendir(dirs[d]);
		if (!dir)
			continue;
		struct dirent *e;
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0)
				continue;
			char path[8192];
			snprintf(path, sizeof(path), "%s/%s", dirs[d], e->d_name);
			char why[8400] = "";
			int fd = connect_path(path, why, sizeof(why));
			if (fd == -EPERM)
				fprintf(stderr, "memvisor ctl: skipping %s: %s\n", path, why);
			if (fd < 0)
				continue;
			close(fd);
			if (n + 1 >= cap)
				v = xrealloc(v, (cap *= 2) * sizeof(*v));
			v[n++] = xstrdup(path);
		}
		closedir(dir);
	}
	v[n] = NULL;
	*count = n;
	return v;
}

static void free_list(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* --socket, then MEMVISOR_SOCKET, then the only live socket. */
static int find_socket(const struct client_opts *o, char **out)
{
	const char *s = o->socket ? o->socket : getenv("MEMVISOR_SOCKET");
	if (s && *s) {
		*out = xstrdup(s);
		return EXIT_OK;
	}
	size_t n;
	char **v = live_sockets(&n);
	if (n == 1) {
		*out = xstrdup(v[0]);
		free_list(v);
		return EXIT_OK;
	}
	if (n == 0) {
		char dirs[3][4096];
		size_t nd = socket_dirs(dirs);
		fprintf(stderr,
			"memvisor ctl: no running memvisor found (looked in %s%s%s); use --socket "
			"PATH\n",
			dirs[0], nd > 1 ? " and " : "", nd > 1 ? dirs[1] : "");
		free_list(v);
		return EXIT_CONNECT;
	}
	fprintf(stderr, "memvisor ctl: %zu memvisors are running; choose one with --socket:\n", n);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", v[i]);
	free_list(v);
	return EXIT_USAGE;
}

static int conn_open(const char *path, int timeout_ms, struct conn *c)
{
	char why[8400] = "";
	int fd = connect_path(path, why, sizeof(why));
	if (fd == -EPERM) {
		fprintf(stderr, "memvisor ctl: refusing to talk to %s: %s\n", path, why);
		return EXIT_CONNECT;
	}
	if (fd < 0) {
		fprintf(stderr, "memvisor ctl: cannot connect to %s: %s\n", path, strerror(-fd));
		return EXIT_CONNECT;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	return EXIT_OK;
}

static void conn_close(struct conn *c)
{
	free(c->buf);
	close(c->fd);
}

/* Read one line (a reply or an event); NULL at EOF, or after timeout_ms
 * without a byte unless wait_forever. */
static json_t *read_msg(struct conn *c, bool wait_forever)
{
	char *nl;
	while (!(nl = c->len ? memchr(c->buf, '\n', c->len) : NULL)) {
		if (!wait_forever) {
			struct pollfd p = {.fd = c->fd, .events = POLLIN};
			int r = poll(&p, 1, c->timeout_ms);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				fprintf(stderr, "memvisor ctl: no reply within %d ms\n",
					c->timeout_ms);
				return NULL;
			}
		}
		if (c->cap - c->len < 65536)
			c->buf = xrealloc(c->buf, c->cap = c->cap ? c->cap * 2 : 131072);
		ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			c->gone = true;
			return NULL;
		}
		c->len += (size_t)n;
	}
	size_t linelen = (size_t)(nl - c->buf);
	json_error_t e;
	json_t *msg = json_loadb(c->buf, linelen, 0, &e);
	if (!msg)
		fprintf(stderr, "memvisor ctl: unreadable reply: %s\n", e.text);
	memmove(c->buf, nl + 1, c->len - linelen - 1);
	c->len -= linelen + 1;
	return msg;
}

static int send_req(struct conn *c, const char *cmd, json_t *args)
{
	json_t *req =
	    json_pack("{s:i, s:s, s:o}", "id", 1, "cmd", cmd, "args", args ? args : json_object());
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	size_t len = strlen(s);
	s = xrealloc(s, len + 2);
	s[len++] = '\n';
	int rc = mv_write_all(c->fd, s, len);
	free(s);
	if (rc == -EPIPE || rc == -ECONNRESET) {
		c->gone = true;
		if (!c->quiet_eof)
			fprintf(stderr,
				"memvisor ctl: memvisor closed the connection before the "
				"request was sent: it has exited (it exits once the "
				"supervised command has ended); the %s request did not run\n",
				cmd);
		return EXIT_CONNECT;
	}
	if (rc < 0) {
		fprintf(stderr, "memvisor ctl: cannot send the request: %s\n", strerror(-rc));
		return EXIT_CONNECT;
	}
	return EXIT_OK;
}

/* Send a request and wait for its reply. On an error reply, print it and
 * return EXIT_REPLY; *result gets a new reference on success. */
static int call(struct conn *c, const char *cmd, json_t *args, json_t **result)
{
	int rc = send_req(c, cmd, args);
	if (rc)
		return rc;
	for (;;) {
		json_t *msg = read_msg(c, false);
		if (!msg && c->gone && !c->quiet_eof)
			fprintf(
			    stderr,
			    "memvisor ctl: memvisor closed the connection without answering: it "
			    "has exited (it exits once the supervised command has ended)\n");
		if (!msg)
			return EXIT_CONNECT;
		if (json_object_get(msg, "event")) { /* an event for an earlier subscription */
			json_decref(msg);
			continue;
		}
		if (json_is_true(json_object_get(msg, "ok"))) {
			*result = json_incref(json_object_get(msg, "result"));
			json_decref(msg);
			return EXIT_OK;
		}
		json_t *err = json_object_get(msg, "error");
		fprintf(stderr, "memvisor ctl: %s: %s\n",
			json_string_value(json_object_get(err, "code")),
			json_string_value(json_object_get(err, "message")));
		json_decref(msg);
		return EXIT_REPLY;
	}
}

/* ---- rendering helpers ---------------------------------------------- */

static const char *hsize(json_t *v, char *buf, size_t len)
{
	return mv_human_size((uint64_t)json_integer_value(v), buf, len);
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "-";
}

static long long jint(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static void print_cmdline(json_t *argv, int width)
{
	size_t i;
	json_t *a;
	int used = 0;
	json_array_foreach(argv, i, a)
	{
		const char *s = json_string_value(a);
		int n = printf("%s%s", i ? " " : "", s);
		used += n;
		if (width > 0 && used > width)
			break;
	}
}

static void fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns < 10000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 10000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
}

/* ---- commands ------------------------------------------------------- */

struct ctl_op {
	const char *name;
	const char *usage;
	int min_args, max_args;
	/* Build the request args from the command's words; print usage errors. */
	int (*args)(int argc, char **argv, json_t **args);
	void (*render)(json_t *result);
	const char *summary;
};

static int no_args(int argc, char **argv, json_t **args)
{
	*args = json_object();
	return 0;
}

static int parse_pid(const char *s, long long *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || v <= 0) {
		fprintf(stderr, "memvisor ctl: '%s' is not a process id\n", s);
		return -1;
	}
	*out = v;
	return 0;
}

static int pid_args(int argc, char **argv, json_t **args)
{
	long long pid;
	if (argc < 1 || parse_pid(argv[0], &pid) < 0)
		return -1;
	*args = json_pack("{s:I}", "pid", (json_int_t)pid);
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--source=", 9) == 0) {
			json_object_set_new(*args, "source", json_string(argv[i] + 9));
		} else {
			fprintf(stderr, "memvisor ctl: unexpected argument '%s'\n", argv[i]);
			json_decref(*args);
			return -1;
		}
	}
	return 0;
}

static int opt_pid_args(int argc, char **argv, json_t **args)
{
	if (argc == 0)
		return no_args(argc, argv, args);
	return pid_args(argc, argv, args);
}

/* --wait on checkpoint or job: follow the job to its end (follow_job). */
static bool wait_for_job;

static int job_args(int argc, char **argv, json_t **args)
{
	char *end;
	long long id = strtoll(argv[0], &end, 10);
	if (!*argv[0] || *end || id <= 0) {
		fprintf(stderr, "memvisor ctl: '%s' is not a job id\n", argv[0]);
		return -1;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--wait") != 0) {
			fprintf(stderr, "memvisor ctl: unexpected argument '%s'\n", argv[i]);
			return -1;
		}
		wait_for_job = true;
	}
	*args = json_pack("{s:I}", "id", (json_int_t)id);
	return 0;
}

/* checkpoint DIR [--pid PID]... [--force] [--wait] [--buffer SIZE] [--stop-timeout SECONDS] */
static int checkpoint_args(int argc, char **argv, json_t **args)
{
	const char *dir = NULL;
	json_t *pids = json_array();
	*args = json_object();
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		long long pid;
		uint64_t size;
		if (strcmp(a, "--force") == 0) {
			json_object_set_new(*args, "force", json_true());
		} else if (strcmp(a, "--evict") == 0) {
			json_object_set_new(*args, "evict", json_true());
		} else if (strcmp(a, "--wait") == 0) {
			wait_for_job = true;
		} else if (strcmp(a, "--pid") == 0 && i + 1 < argc) {
			if (parse_pid(argv[++i], &pid) < 0)
				goto fail;
			json_array_append_new(pids, json_integer((json_int_t)pid));
		} else if (strcmp(a, "--stop-timeout") == 0 && i + 1 < argc) {
			int ms;
			if (cli_parse_seconds_ms(argv[++i], &ms) < 0 || ms < 1) {
				fprintf(stderr,
					"memvisor ctl: --stop-timeout: '%s' is not a number of "
					"seconds\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "stop_timeout_ms", json_integer(ms));
		} else if (strcmp(a, "--buffer") == 0 && i + 1 < argc) {
			if (mv_parse_size(argv[++i], &size) < 0) {
				fprintf(stderr, "memvisor ctl: --buffer: '%s' is not a size\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "buffer", json_integer((json_int_t)size));
		} else if (a[0] == '-' || dir) {
			fprintf(stderr, "memvisor ctl: usage: checkpoint DIR [--pid PID]... "
					"[--force] [--wait]\n");
			goto fail;
		} else {
			dir = a;
		}
	}
	if (!dir) {
		fprintf(stderr, "memvisor ctl: checkpoint: no directory given\n");
		goto fail;
	}
	/* The supervisor has its own working directory. */
	char path[8192];
	if (dir[0] == '/') {
		snprintf(path, sizeof(path), "%s", dir);
	} else {
		char cwd[4096];
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "memvisor ctl: getcwd: %s\n", strerror(errno));
			goto fail;
		}
		snprintf(path, sizeof(path), "%s/%s", cwd, dir);
	}
	json_object_set_new(*args, "dir", json_string(path));
	if (json_array_size(pids))
		json_object_set_new(*args, "pids", pids);
	else
		json_decref(pids);
	return 0;
fail:
	json_decref(pids);
	json_decref(*args);
	return -1;
}

/* reload DIR [--rate MB/s] [--wait] */
static int reload_args(int argc, char **argv, json_t **args)
{
	const char *dir = NULL;
	*args = json_object();
	for (int i = 0; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--wait") == 0) {
			wait_for_job = true;
		} else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc) {
			double rate = strtod(argv[++i], &end);
			if (!*argv[i] || *end || rate < 0) {
				fprintf(stderr,
					"memvisor ctl: --rate: '%s' is not a number of MB/s\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "rate", json_real(rate));
		} else if (argv[i][0] == '-' || dir) {
			fprintf(stderr, "memvisor ctl: usage: reload DIR [--rate MB/s] [--wait]\n");
			goto fail;
		} else {
			dir = argv[i];
		}
	}
	char *abs = dir ? realpath(dir, NULL) : NULL;
	if (!abs) {
		fprintf(stderr, "memvisor ctl: reload: %s: %s\n", dir ? dir : "no directory given",
			dir ? strerror(errno) : "usage: reload DIR [--rate MB/s] [--wait]");
		goto fail;
	}
	json_object_set_new(*args, "dir", json_string(abs));
	free(abs);
	return 0;
fail:
	json_decref(*args);
	return -1;
}

static void render_hello(json_t *r)
{
	printf("memvisor %s (protocol %lld), supervisor pid %lld\n", jstr(r, "memvisor"),
	       jint(r, "protocol"), jint(r, "pid"));
	printf("command: ");
	print_cmdline(json_object_get(r, "command"), 0);
	printf("\nsocket:  %s\n", jstr(r, "socket"));
	json_t *f = json_object_get(r, "features");
	printf("kernel:  %s\n", jstr(f, "kernel"));
	json_t *un = json_object_get(f, "user_notif");
	json_t *uf = json_object_get(f, "userfaultfd");
	printf("features: sync_wake_up=%s wait_killable_recv=%s procmap_query=%s pagemap_scan=%s "
	       "pidfd_getfd=%s mdwe=%s userfaultfd=%s\n",
	       json_is_true(json_object_get(un, "sync_wake_up")) ? "yes" : "no",
	       json_is_true(json_object_get(un, "wait_killable_recv")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "procmap_query")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "pagemap_scan")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "pidfd_getfd")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "mdwe")) ? "yes" : "no",
	       json_is_true(json_object_get(uf, "dev"))	      ? "dev"
	       : json_is_true(json_object_get(uf, "syscall")) ? "syscall"
							      : "no");
	printf("commands:");
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(r, "commands"), i, c) printf(" %s", jstr(c, "name"));
	printf("\n");
}

static void render_jobs_list(json_t *jobs);

static void render_status(json_t *r)
{
	char a[32], b[32];
	json_t *t = json_object_get(r, "totals");
	printf("command:       ");
	print_cmdline(json_object_get(r, "command"), 0);
	printf("\ncommand pid:   %lld (%s", jint(r, "command_pid"), jstr(r, "command_state"));
	if (json_is_integer(json_object_get(r, "exit_status")))
		printf(", exit status %lld", jint(r, "exit_status"));
	printf(")\nuptime:        %.1f s\n", json_real_value(json_object_get(r, "uptime")));
	printf("processes:     %lld running, %lld seen\n", jint(r, "processes"),
	       jint(r, "processes_seen"));
	printf("memory:        %s mapped, %s committed\n",
	       hsize(json_object_get(t, "mapped"), a, sizeof(a)),
	       hsize(json_object_get(t, "committed"), b, sizeof(b)));
	printf("notifications: %lld (%lld denied, %lld killed)\n", jint(t, "notifications"),
	       jint(t, "denials"), jint(t, "kills"));
	json_t *jobs = json_object_get(r, "jobs");
	if (json_array_size(jobs)) {
		printf("jobs:\n");
		render_jobs_list(jobs);
	}
}

static void render_ps(json_t *r)
{
	printf("%7s %7s %4s %-12s %10s %10s %8s  %s\n", "PID", "PPID", "THR", "STATE", "MAPPED",
	       "COMMITTED", "CALLS", "COMMAND");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "processes"), i, p)
	{
		char a[32], b[32];
		printf("%7lld %7lld %4lld %-12s %10s %10s %8lld  ", jint(p, "pid"), jint(p, "ppid"),
		       jint(p, "threads"), jstr(p, "state"),
		       hsize(json_object_get(p, "mapped"), a, sizeof(a)),
		       hsize(json_object_get(p, "committed"), b, sizeof(b)), jint(p, "calls"));
		print_cmdline(json_object_get(p, "cmdline"), 60);
		printf("\n");
	}
}

static void render_regions(json_t *r)
{
	char a[32], b[32], c[32];
	printf("%-14s %-14s %10s %-4s %-6s %-8s %10s %-10s %s\n", "START", "END", "SIZE", "PROT",
	       "SHARE", "KIND", "COMMITTED", "CREATED", "PATH");
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(r, "regions"), i, g)
	{
		json_t *cb = json_object_get(g, "created_by");
		printf("%-14s %-14s %10s %-4s %-6s %-8s %10s %-10s %s\n", jstr(g, "start") + 2,
		       jstr(g, "end") + 2, hsize(json_object_get(g, "size"), a, sizeof(a)),
		       jstr(g, "prot"),
		       json_is_true(json_object_get(g, "shared")) ? "shared" : "priv",
		       jstr(g, "kind"), hsize(json_object_get(g, "committed"), b, sizeof(b)),
		       json_is_object(cb) ? jstr(cb, "syscall") : "-",
		       json_is_string(json_object_get(g, "path")) ? jstr(g, "path") : "");
	}
	fmt_ns((uint64_t)jint(r, "reconcile_ns"), c, sizeof(c));
	printf("%lld regions, %s mapped, %s committed (pid %lld, read with %s in %s)\n",
	       jint(r, "count"), hsize(json_object_get(r, "mapped"), a, sizeof(a)),
	       hsize(json_object_get(r, "committed"), b, sizeof(b)), jint(r, "pid"),
	       jstr(r, "source"), c);
}

static void render_stat_block(json_t *s)
{
	static const char *const verdicts[] = {"allow", "log", "deny", "kill"};
	printf("  %-18s %9s %9s %9s %9s %12s\n", "SYSCALL", "ALLOW", "LOG", "DENY", "KILL",
	       "BYTES");
	const char *name;
	json_t *by;
	json_t *bytes = json_object_get(s, "bytes");
	json_object_foreach(json_object_get(s, "calls"), name, by)
	{
		char b[32] = "-";
		if (json_object_get(bytes, name))
			hsize(json_object_get(bytes, name), b, sizeof(b));
		printf("  %-18s", name);
		for (size_t i = 0; i < ARRAY_SIZE(verdicts); i++)
			printf(" %9lld", jint(by, verdicts[i]));
		printf(" %12s\n", b);
	}
	json_t *h = json_object_get(s, "service_ns");
	char p50[32], p99[32], p999[32], mx[32];
	fmt_ns((uint64_t)jint(h, "p50"), p50, sizeof(p50));
	fmt_ns((uint64_t)jint(h, "p99"), p99, sizeof(p99));
	fmt_ns((uint64_t)jint(h, "p999"), p999, sizeof(p999));
	fmt_ns((uint64_t)jint(h, "max"), mx, sizeof(mx));
	printf("  %lld calls; service time p50 %s, p99 %s, p99.9 %s, max %s\n", jint(s, "total"),
	       p50, p99, p999, mx);
}

static void render_stats(json_t *r)
{
	if (json_object_get(r, "totals")) {
		printf("all processes (%lld notifications):\n", jint(r, "notifications"));
		render_stat_block(json_object_get(r, "totals"));
		return;
	}
	printf("pid %lld (%s)%s:\n", jint(r, "pid"), jstr(r, "exe"),
	       json_is_true(json_object_get(r, "exited")) ? ", exited" : "");
	render_stat_block(json_object_get(r, "stats"));
}

static void render_job_line(json_t *j)
{
	char a[32], b[32];
	double rate = json_real_value(json_object_get(j, "rate"));
	printf("  job %lld %-10s %-8s %-12s %s / %s (%.1f MB/s, %.1f s)\n", jint(j, "id"),
	       jstr(j, "kind"), jstr(j, "state"), jstr(j, "phase"),
	       hsize(json_object_get(j, "done"), a, sizeof(a)),
	       hsize(json_object_get(j, "total"), b, sizeof(b)), rate / 1e6,
	       json_real_value(json_object_get(j, "elapsed")));
	json_t *e = json_object_get(j, "error");
	if (e)
		printf("    error: %s: %s\n", jstr(e, "code"), jstr(e, "message"));
}

static void render_jobs_list(json_t *jobs)
{
	size_t i;
	json_t *j;
	json_array_foreach(jobs, i, j) render_job_line(j);
}

static double ms(json_t *o, const char *key)
{
	return (double)jint(o, key) / 1e6;
}

static void render_checkpoint_result(json_t *res)
{
	char a[32], b[32], c[32];
	printf("image %s (id %s)\n", jstr(res, "dir"), jstr(res, "id"));
	printf("  %zu processes, %lld threads, %lld regions, %lld extents\n",
	       json_array_size(json_object_get(res, "processes")), jint(res, "threads"),
	       jint(res, "regions"), jint(res, "extents"));
	printf("  %s written (%s committed in the processes), %s of it shared memory\n",
	       hsize(json_object_get(res, "bytes"), a, sizeof(a)),
	       hsize(json_object_get(res, "committed"), b, sizeof(b)),
	       hsize(json_object_get(res, "shared_bytes"), c, sizeof(c)));
	printf("  paused %.1f ms (stop %.1f, layout %.1f, copy %.1f); synced %.1f ms after; "
	       "%.1f ms in all, %.0f MB/s\n",
	       ms(res, "pause_ns"), ms(res, "stop_ns"), ms(res, "layout_ns"), ms(res, "copy_ns"),
	       ms(res, "sync_ns"), ms(res, "elapsed_ns"),
	       json_real_value(json_object_get(res, "rate")) / 1e6);
	json_t *ev = json_object_get(res, "evicted");
	if (ev)
		printf("  evicted: %s in %lld regions (%lld left resident; shared memory stays "
		       "resident)\n",
		       hsize(json_object_get(ev, "bytes"), a, sizeof(a)), jint(ev, "regions"),
		       jint(ev, "kept_regions"));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(ev, "skipped"), i, p)
	    printf("  not evicted: process %lld %s\n", jint(p, "pid"), jstr(p, "reason"));
	json_array_foreach(json_object_get(res, "processes"), i, p)
	{
		if (strcmp(jstr(p, "state"), "gone") == 0)
			printf("  process %lld: gone (exited during the checkpoint)\n",
			       jint(p, "pid"));
		else
			printf("  process %lld: %lld threads, %s, paused %.1f ms\n", jint(p, "pid"),
			       jint(p, "threads"), hsize(json_object_get(p, "bytes"), a, sizeof(a)),
			       ms(p, "pause_ns"));
	}
}

static void render_job(json_t *r)
{
	render_job_line(r);
	json_t *res = json_object_get(r, "result");
	if (res && strcmp(jstr(r, "kind"), "checkpoint") == 0) {
		render_checkpoint_result(res);
	} else if (res) {
		char *s = json_dumps(res, JSON_INDENT(2) | JSON_SORT_KEYS);
		printf("%s\n", s);
		free(s);
	}
}

static void render_jobs(json_t *r)
{
	render_jobs_list(json_object_get(r, "jobs"));
}

static void render_raw(json_t *r)
{
	char *s = json_dumps(r, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	printf("%s\n", s);
	free(s);
}

static void render_reload_started(json_t *r)
{
	printf("reload job %lld started: %s (follow it with: memvisor ctl job %lld --wait)\n",
	       jint(r, "job"), jstr(r, "dir"), jint(r, "job"));
}

static void render_started(json_t *r)
{
	printf("checkpoint job %lld started: %s (follow it with: memvisor ctl job %lld --wait)\n",
	       jint(r, "job"), jstr(r, "dir"), jint(r, "job"));
}

/* `ctl call CMD [JSON]`: any command with raw arguments, for scripts. */
static int call_args(int argc, char **argv, json_t **args)
{
	if (argc < 2) {
		*args = json_object();
		return 0;
	}
	json_error_t e;
	*args = json_loads(argv[1], 0, &e);
	if (!*args || !json_is_object(*args)) {
		fprintf(stderr, "memvisor ctl: call: arguments must be a JSON object: %s\n",
			*args ? "not an object" : e.text);
		json_decref(*args);
		return -1;
	}
	return 0;
}

static int policy_args(int argc, char **argv, json_t **args)
{
	if (argc == 0)
		return no_args(argc, argv, args);
	if (argc == 2 && strcmp(argv[0], "set") == 0) {
		char *abs = realpath(argv[1], NULL);
		if (!abs) {
			fprintf(stderr, "memvisor ctl: %s: %s\n", argv[1], strerror(errno));
			return -1;
		}
		*args = json_pack("{s:s}", "path", abs);
		free(abs);
		return 0;
	}
	fprintf(stderr, "memvisor ctl: usage: policy [set FILE]\n");
	return -1;
}

static const struct ctl_op ops[] = {
    {"hello", "hello", 0, 0, no_args, render_hello, "versions, pid, kernel features"},
    {"status", "status", 0, 0, no_args, render_status, "uptime, processes, totals, jobs"},
    {"ps", "ps", 0, 0, no_args, render_ps, "every supervised process"},
    {"regions", "regions PID [--source=auto|procmap_query|maps]", 1, 2, pid_args, render_regions,
     "a process's address space, as the kernel has it now"},
    {"stats", "stats [PID]", 0, 1, opt_pid_args, render_stats,
     "calls by syscall and verdict, bytes, service time"},
    {"events", "events", 0, 0, no_args, NULL, "follow the event stream (Ctrl-C to stop)"},
    {"policy", "policy [set FILE]", 0, 2, policy_args, render_raw,
     "show the active policy, or replace it"},
    {"job", "job ID [--wait]", 1, 2, job_args, render_job,
     "a job's progress or result; --wait follows it to the end"},
    {"checkpoint", "checkpoint DIR [--pid PID]... [--force] [--evict] [--wait]", 1, 64,
     checkpoint_args, render_started,
     "write the memory of the processes to an image in DIR (--evict: and drop it)"},
    {"reload", "reload DIR [--rate MB/s] [--wait]", 1, 4, reload_args, render_reload_started,
     "load evicted memory back in the background"},
    {"jobs", "jobs", 0, 0, no_args, render_jobs, "every job of this run"},
    {"call", "call COMMAND [JSON-ARGS]", 1, 2, call_args, render_raw,
     "send any request; prints the raw result"},
};

static const struct cli_opt client_opts_table[] = {
    {"socket", required_argument, 's', "PATH",
     "the supervisor's socket (default: the only one running)"},
    {"json", no_argument, 'j', NULL, "print the raw JSON result (one line per event for events)"},
    {"list", no_argument, 'l', NULL, "list the running memvisors of this user"},
    {"timeout", required_argument, 't', "SECONDS", "how long to wait for a reply (default 30)"},
    {"help", no_argument, 'h', NULL, "show this help"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor ctl [OPTION]... COMMAND [ARG]...\n"
		   "Query and control a running memvisor over its socket.\n\nOptions:\n");
	cli_print_opts(f, client_opts_table, ARRAY_SIZE(client_opts_table));
	fprintf(f, "\nCommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		fprintf(f, "  %-44s %s\n", ops[i].usage, ops[i].summary);
	fprintf(f, "\nThe socket is found from --socket, then $MEMVISOR_SOCKET, then the only\n"
		   "running memvisor of this user.\n"
		   "Exit status: 0 ok, 1 error reply, 2 usage, 3 cannot connect.\n");
}

/* ---- events --------------------------------------------------------- */

static void render_event(json_t *e)
{
	double t = json_real_value(json_object_get(e, "time"));
	time_t secs = (time_t)t;
	struct tm tm;
	localtime_r(&secs, &tm);
	printf("%02d:%02d:%02d.%03d ", tm.tm_hour, tm.tm_min, tm.tm_sec,
	       (int)(fmod(t, 1.0) * 1000));
	const char *kind = jstr(e, "event");
	if (strcmp(kind, "call") == 0) {
		printf("%-6lld %-14s %-6s", jint(e, "pid"), jstr(e, "syscall"), jstr(e, "verdict"));
		const char *k;
		json_t *v;
		json_object_foreach(json_object_get(e, "args"), k, v)
		{
			if (json_is_string(v))
				printf(" %s=%s", k, json_string_value(v));
			else
				printf(" %s=%lld", k, (long long)json_integer_value(v));
		}
		if (json_object_get(e, "rule"))
			printf(" rule=%s", jstr(e, "rule"));
	} else if (strcmp(kind, "job") == 0) {
		printf("job    ");
		render_job_line(e);
		return;
	} else if (strcmp(kind, "dropped") == 0) {
		printf("(%lld events dropped: this reader fell behind)", jint(e, "count"));
	} else {
		printf("%-6lld %-14s", jint(e, "pid"), kind);
		print_cmdline(json_object_get(e, "cmdline"), 80);
		if (json_object_get(e, "status"))
			printf(" (status %lld)", jint(e, "status"));
	}
	printf("\n");
}

static int follow_events(struct conn *c, bool raw)
{
	json_t *res;
	int rc = call(c, "events", NULL, &res);
	if (rc)
		return rc;
	json_decref(res);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		json_t *e = read_msg(c, true);
		if (!e)
			return EXIT_OK; /* the supervisor exited */
		if (raw) {
			char *s = json_dumps(e, JSON_COMPACT);
			printf("%s\n", s);
			free(s);
		} else {
			render_event(e);
		}
		json_decref(e);
	}
}

/* ---- following a job -------------------------------------------------- */

static void progress_line(json_t *j, bool tty)
{
	char a[32], b[32];
	double done = (double)jint(j, "done"), total = (double)jint(j, "total");
	double frac = total > 0 ? done / total : 0.0;
	hsize(json_object_get(j, "done"), a, sizeof(a));
	hsize(json_object_get(j, "total"), b, sizeof(b));
	double rate = json_real_value(json_object_get(j, "rate")) / 1e6;
	if (!tty) {
		fprintf(stderr, "job %lld %s %s: %.0f%% %s / %s, %.0f MB/s, %.1f s\n",
			jint(j, "id"), jstr(j, "kind"), jstr(j, "phase"), frac * 100, a, b, rate,
			json_real_value(json_object_get(j, "elapsed")));
		return;
	}
	char bar[31];
	int full = (int)(frac * 30 + 0.5);
	for (int i = 0; i < 30; i++)
		bar[i] = i < full ? '#' : '.';
	bar[30] = '\0';
	fprintf(stderr, "\r\033[K%s %-9s [%s] %3.0f%% %s / %s %.0f MB/s", jstr(j, "kind"),
		jstr(j, "phase"), bar, frac * 100, a, b, rate);
}

/* memvisor went away while we followed job id: it exits once the
 * supervised command has ended, after waiting for its jobs, and answers
 * a last moment (ctl_server_stop); this is what is left when it could
 * not (killed, or we were too slow). Say what is known: for a
 * checkpoint, whether its image is there. */
static int job_lost(long long id, const char *dir, bool tty)
{
	if (tty)
		fprintf(stderr, "\r\033[K");
	fprintf(stderr,
		"memvisor ctl: memvisor exited before saying how job %lld ended (it exits once "
		"the supervised command has ended)",
		id);
	struct stat st;
	if (dir && stat(dir, &st) == 0)
		fprintf(stderr, "; an image is at %s: check it with memvisor image verify %s\n",
			dir, dir);
	else if (dir)
		fprintf(stderr, "; no image was written to %s\n", dir);
	else
		fprintf(stderr, "\n");
	return EXIT_REPLY;
}

/* Poll `job ID` until it ends: a bar on a terminal, a line a second (and
 * at every phase) otherwise, both on stderr; then the result on stdout.
 * Exit status 0 when the job is done, 1 when it failed (or memvisor went
 * away before saying: job_lost). dir: a checkpoint's, or NULL. */
static int follow_job(struct conn *c, long long id, bool raw, const char *dir)
{
	bool tty = isatty(STDERR_FILENO);
	char phase[32] = "";
	uint64_t last = 0;
	c->quiet_eof = true;
	for (;;) {
		json_t *j = NULL;
		int rc = call(c, "job", json_pack("{s:I}", "id", (json_int_t)id), &j);
		if (rc == EXIT_CONNECT && c->gone)
			return job_lost(id, dir, tty);
		if (rc)
			return rc;
		const char *state = jstr(j, "state");
		if (strcmp(state, "running") != 0) {
			if (tty)
				fprintf(stderr, "\r\033[K");
			if (raw) {
				char *s = json_dumps(j, JSON_COMPACT);
				printf("%s\n", s);
				free(s);
			} else {
				render_job(j);
			}
			json_t *e = json_object_get(j, "error");
			if (e)
				fprintf(stderr, "memvisor ctl: job %lld failed: %s: %s\n", id,
					jstr(e, "code"), jstr(e, "message"));
			rc = strcmp(state, "done") == 0 ? EXIT_OK : EXIT_REPLY;
			json_decref(j);
			return rc;
		}
		uint64_t now = mv_now_ns();
		if (tty || strcmp(phase, jstr(j, "phase")) != 0 || now - last >= 1000000000ull) {
			progress_line(j, tty);
			snprintf(phase, sizeof(phase), "%s", jstr(j, "phase"));
			last = now;
		}
		json_decref(j);
		struct timespec ts = {0, 100 * 1000000};
		nanosleep(&ts, NULL);
	}
}

/* ---- main ----------------------------------------------------------- */

static int list_sockets(void)
{
	size_t n;
	char **v = live_sockets(&n);
	for (size_t i = 0; i < n; i++) {
		struct conn c;
		json_t *r = NULL;
		printf("%s", v[i]);
		if (conn_open(v[i], 2000, &c) == EXIT_OK) {
			if (call(&c, "hello", NULL, &r) == EXIT_OK) {
				printf("  pid %lld: ", jint(r, "pid"));
				print_cmdline(json_object_get(r, "command"), 60);
				json_decref(r);
			}
			conn_close(&c);
		}
		printf("\n");
	}
	free_list(v);
	return EXIT_OK;
}

static const struct ctl_op *find_op(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].name, name) == 0)
			return &ops[i];
	return NULL;
}

static int parse_client_opts(int argc, char **argv, struct client_opts *o)
{
	struct option longopts[ARRAY_SIZE(client_opts_table) + 1];
	char shortopts[3 * ARRAY_SIZE(client_opts_table) + 3];
	cli_getopt_tables(client_opts_table, ARRAY_SIZE(client_opts_table), longopts, shortopts);
	o->timeout_ms = 30000;
	optind = 1;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o->socket = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'l':
			o->list = true;
			break;
		case 't':
			if (cli_parse_seconds_ms(optarg, &o->timeout_ms) < 0) {
				fprintf(
				    stderr,
				    "memvisor ctl: --timeout: '%s' is not a number of seconds\n",
				    optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			fprintf(stderr, "memvisor ctl: option '%s' needs an argument\n",
				argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr,
				"memvisor ctl: unknown option '%s' (see memvisor ctl --help)\n",
				argv[optind - 1]);
			return -1;
		}
	}
	return 0;
}

int ctl_client_main(int argc, char **argv)
{
	struct client_opts o = {0};
	if (parse_client_opts(argc, argv, &o) < 0)
		return EXIT_USAGE;
	if (o.list)
		return list_sockets();
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const struct ctl_op *op = find_op(argv[optind]);
	if (!op) {
		fprintf(stderr, "memvisor ctl: unknown command '%s' (see memvisor ctl --help)\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	int nargs = argc - optind - 1;
	char **words = argv + optind + 1;
	if (nargs < op->min_args || nargs > op->max_args) {
		fprintf(stderr, "memvisor ctl: usage: %s\n", op->usage);
		return EXIT_USAGE;
	}
	json_t *args = NULL;
	if (op->args(nargs, words, &args) < 0)
		return EXIT_USAGE;
	_cleanup_free_ char *path = NULL;
	int rc = find_socket(&o, &path);
	if (rc) {
		json_decref(args);
		return rc;
	}
	struct conn c;
	if ((rc = conn_open(path, o.timeout_ms, &c))) {
		json_decref(args);
		return rc;
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(op->name, "events") == 0) {
		json_decref(args);
		rc = follow_events(&c, o.json);
		conn_close(&c);
		return rc;
	}
	const char *cmd = strcmp(op->name, "call") == 0 ? words[0] : op->name;
	if (strcmp(op->name, "policy") == 0 && json_object_get(args, "path"))
		cmd = "policy_set";
	json_t *result = NULL;
	rc = call(&c, cmd, args, &result);
	if (rc == EXIT_OK && wait_for_job) {
		long long id = jint(result, strcmp(op->name, "job") == 0 ? "id" : "job");
		const char *d = json_string_value(json_object_get(result, "dir"));
		_cleanup_free_ char *dir =
		    strcmp(op->name, "checkpoint") == 0 && d ? xstrdup(d) : NULL;
		json_decref(result);
		rc = follow_job(&c, id, o.json, dir);
		conn_close(&c);
		return rc;
	}
	conn_close(&c);
	if (rc)
		return rc;
	if (o.json) {
		char *s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
		printf("%s\n", s);
		free(s);
	} else {
		op->render(result);
	}
	json_decref(result);
	return EXIT_OK;
}
