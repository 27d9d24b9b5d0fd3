#include "tracee/launch.h"
#include "common/compat.h"
#include "common/fdpass.h"
#include "common/util.h"

#include <errno.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static void report(int sock, int stage, int err)
{
	struct launch_msg m = {.stage = stage, .err = err};
	/* sendmsg(2) is not notified: safe with the filter loaded. */
	(void)fd_send(sock, &m, sizeof(m), -1);
}

static _Noreturn void fail(const struct launch_spec *s, int stage, int err, int status)
{
	report(s->sock, stage, err);
	_exit(status);
}

static int send_listener(int sock, int listener, unsigned long flags)
{
	struct launch_msg m = {.stage = LAUNCH_OK, .err = 0, .filter_flags = flags};
	return fd_send(sock, &m, sizeof(m), listener);
}

static int restore_signals(const struct launch_spec *s)
{
	for (int sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = s->ignored[sig] ? SIG_IGN : SIG_DFL;
		/* Signals glibc reserves (32, 33) refuse with EINVAL: fine. */
		if (sigaction(sig, &sa, NULL) < 0 && errno != EINVAL)
			return -errno;
	}
	return sigprocmask(SIG_SETMASK, &s->mask, NULL) < 0 ? -errno : 0;
}

static int load_filter(const struct launch_spec *s, unsigned long *used)
{
	*used = s->filter_flags;
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, s->filter_flags, &s->prog);
	if (fd < 0 && errno == EINVAL && s->fallback_flags != s->filter_flags) {
		*used = s->fallback_flags;
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, s->fallback_flags, &s->prog);
	}
	return fd < 0 ? -errno : (int)fd;
}

/* execvp(3)'s rules: keep searching past "not here" errors, remember a
 * permission error, stop at anything else. ENOEXEC runs the file with
 * /bin/sh. Each execve is itself notified and answered by the supervisor,
 * which holds the listener by now. */
static int exec_candidates(const struct launch_spec *s)
{
	int err = ENOENT;
	bool saw_eacces = false;
	for (char *const *c = s->candidates; *c; c++) {
		execve(*c, s->argv, s->envp);
		err = errno;
		if (err == ENOEXEC) {
			char *sh_argv[s->argc + 2];
			sh_argv[0] = (char *)"/bin/sh";
			sh_argv[1] = *c;
			for (int i = 1; i <= s->argc; i++)
				sh_argv[i + 1] = s->argv[i];
			execve("/bin/sh", sh_argv, s->envp);
			return errno;
		}
		if (err == EACCES)
			saw_eacces = true;
		else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV &&
			 err != ETIMEDOUT)
			return err;
	}
	return saw_eacces ? EACCES : err;
}

void launch_exec(const struct launch_spec *s)
{
	/* The parent may die between fork and prctl: then PDEATHSIG would
	 * never fire, so compare the parent pid after setting it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		fail(s, LAUNCH_PDEATHSIG, errno, 125);
	if (getppid() != s->parent)
		fail(s, LAUNCH_PARENT_GONE, ESRCH, 125);
	int rc = restore_signals(s);
	if (rc < 0)
		fail(s, LAUNCH_SIGNALS, -rc, 125);
	/* Without CAP_SYS_ADMIN the kernel loads a filter only under
	 * no_new_privs (seccomp_prepare_filter). With it, setuid and
	 * file-capability programs keep working under the filter. */
	if (s->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(s, LAUNCH_NO_NEW_PRIVS, errno, 125);
	if (s->set_rlimit_as && setrlimit(RLIMIT_AS, &s->rlimit_as) < 0)
		fail(s, LAUNCH_RLIMIT, errno, 125);
	if (s->clear_read_implies_exec) {
		int persona = personality(0xffffffff);
		if (persona != -1 && (persona & READ_IMPLIES_EXEC) &&
		    personality((unsigned long)persona & ~(unsigned long)READ_IMPLIES_EXEC) == -1)
			fail(s, LAUNCH_PERSONALITY, errno, 125);
	}
	if (s->mdwe && prctl(PR_SET_MDWE, s->mdwe, 0, 0, 0) < 0)
		fail(s, LAUNCH_MDWE, errno, 125);
	/* Needs NO_NEW_PRIVS (landlock_restrict_self(2)); inherited by every
	 * descendant, like the filter. */
	if (s->landlock && syscall(SYS_landlock_restrict_self, s->landlock_fd, 0) < 0)
		fail(s, LAUNCH_LANDLOCK, errno, 125);
	unsigned long flags;
	int listener = load_filter(s, &flags);
	if (listener < 0)
		fail(s, LAUNCH_SECCOMP, -listener, 125);
	/* From here on no notified call until the supervisor has the fd. */
	rc = send_listener(s->sock, listener, flags);
	if (rc < 0)
		fail(s, LAUNCH_HANDOVER, -rc, 125);
	char ack;
	ssize_t n;
	do
		n = recv(s->sock, &ack, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(125); /* the supervisor is gone */
	close(listener);
	/* --user, last: the filter and the rest were set up with memvisor's
	 * privilege (no no_new_privs needed); setgroups and set*id are not
	 * notified. A change of credentials clears the parent-death signal
	 * (kernel/cred.c commit_creds), so it is set again, and the parent
	 * checked again for the same race as above. */
	if (s->set_ids) {
		if (setgroups(s->n_groups, s->groups) < 0 ||
		    setresgid(s->gid, s->gid, s->gid) < 0 || setresuid(s->uid, s->uid, s->uid) < 0)
			fail(s, LAUNCH_USER, errno, 125);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			fail(s, LAUNCH_PDEATHSIG, errno, 125);
		if (getppid() != s->parent)
			fail(s, LAUNCH_PARENT_GONE, ESRCH, 125);
	}
	int err = exec_candidates(s);
	fail(s, LAUNCH_EXEC, err, launch_exec_status(err));
}

int launch_exec_status(int err)
{
	return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

char **launch_candidates(const char *cmd, const char *path_env)
{
	if (strchr(cmd, '/')) {
		char **v = xcalloc(2, sizeof(*v));
		v[0] = xstrdup(cmd);
		return v;
	}
	/* glibc's default search path when PATH is unset (confstr _CS_PATH). */
	const char *path = path_env ? path_env : "/bin:/usr/bin";
	size_t n = 1;
	for (const char *p = path; *p; p++)
		n += *p == ':';
	char **v = xcalloc(n + 1, sizeof(*v));
	size_t i = 0;
	const char *start = path;
	for (;;) {
		const char *end = strchrnul(start, ':');
		size_t dlen = (size_t)(end - start);
		/* An empty element means the current directory. */
		size_t len = (dlen ? dlen : 1) + 1 + strlen(cmd) + 1;
		v[i] = xmalloc(len);
		snprintf(v[i], len, "%.*s/%s", dlen ? (int)dlen : 1, dlen ? start : ".", cmd);
		i++;
		if (!*end)
			break;
		start = end + 1;
	}
	v[i] = NULL;
	return v;
}
