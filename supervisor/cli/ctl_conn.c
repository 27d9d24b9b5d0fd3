/* memvisor ctl: the connection to a supervisor's control socket.
 *
 * A socket path is only a name: before a request is sent the client
 * checks who owns it and who listens on it, since a request (a checkpoint
 * directory, a policy file) may say more than its sender wants another
 * user to read. */
#include "supervisor/cli/ctl_conn.h"
#include "common/util.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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

int ctl_conn_connect(const char *path, char *why, size_t n)
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

int ctl_conn_open(const char *path, int timeout_ms, struct ctl_conn *c)
{
	char why[8400] = "";
	int fd = ctl_conn_connect(path, why, sizeof(why));
	if (fd == -EPERM) {
		fprintf(stderr, "memvisor ctl: refusing to talk to %s: %s\n", path, why);
		return CTL_EXIT_CONNECT;
	}
	if (fd < 0) {
		fprintf(stderr, "memvisor ctl: cannot connect to %s: %s\n", path, strerror(-fd));
		return CTL_EXIT_CONNECT;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	return CTL_EXIT_OK;
}

void ctl_conn_close(struct ctl_conn *c)
{
	free(c->buf);
	close(c->fd);
}

json_t *ctl_conn_read(struct ctl_conn *c, bool wait_forever)
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

static int send_req(struct ctl_conn *c, const char *cmd, json_t *args)
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
		return CTL_EXIT_CONNECT;
	}
	if (rc < 0) {
		fprintf(stderr, "memvisor ctl: cannot send the request: %s\n", strerror(-rc));
		return CTL_EXIT_CONNECT;
	}
	return CTL_EXIT_OK;
}

/* m in the user's words: "args.KEY[...]: what" names the protocol's
 * member; the user gave it as --OPTION, or as an operand (then "what"
 * alone says it: "no job 99"). Anything else is left as it is. */
static void user_words(const struct ctl_conn *c, const char *m, char *out, size_t size)
{
	size_t klen = strlen("args.");
	size_t key = strncmp(m, "args.", klen) == 0 ? strcspn(m + klen, "[:") : 0;
	const char *rest = key ? strchr(m + klen + key, ':') : NULL;
	for (size_t i = 0; rest && rest[1] == ' ' && i < c->n_args; i++) {
		const struct cli_arg *a = &c->args[i];
		if (strlen(a->key) != key || strncmp(a->key, m + klen, key) != 0)
			continue;
		if (a->name)
			snprintf(out, size, "--%s%s", a->name, rest);
		else
			snprintf(out, size, "%s", rest + 2);
		return;
	}
	snprintf(out, size, "%s", m);
}

int ctl_conn_call(struct ctl_conn *c, const char *cmd, json_t *args, json_t **result)
{
	int rc = send_req(c, cmd, args);
	if (rc)
		return rc;
	for (;;) {
		json_t *msg = ctl_conn_read(c, false);
		if (!msg && c->gone && !c->quiet_eof)
			fprintf(
			    stderr,
			    "memvisor ctl: memvisor closed the connection without answering: it "
			    "has exited (it exits once the supervised command has ended)\n");
		if (!msg)
			return CTL_EXIT_CONNECT;
		if (json_object_get(msg, "event")) { /* an event for an earlier subscription */
			json_decref(msg);
			continue;
		}
		if (json_is_true(json_object_get(msg, "ok"))) {
			*result = json_incref(json_object_get(msg, "result"));
			json_decref(msg);
			return CTL_EXIT_OK;
		}
		/* The message is for people; the code is for scripts, which
		 * get the error object itself with --json. */
		json_t *err = json_object_get(msg, "error");
		const char *m = json_string_value(json_object_get(err, "message"));
		if (c->json_errors) {
			char *line = json_dumps(err, JSON_COMPACT | JSON_SORT_KEYS);
			fprintf(stderr, "%s\n", line ? line : "{}");
			free(line);
		} else if (m && *m) {
			char words[1024];
			user_words(c, m, words, sizeof(words));
			fprintf(stderr, "memvisor ctl: %s\n", words);
		} else {
			fprintf(stderr, "memvisor ctl: %s\n",
				json_string_value(json_object_get(err, "code")));
		}
		json_decref(msg);
		return CTL_EXIT_REPLY;
	}
}
