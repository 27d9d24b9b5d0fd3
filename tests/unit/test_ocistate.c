/* The state message of an OCI runtime (state/ocistate.c) and the OCI
 * seccomp profile of a policy (policy/ociprofile.c). */
#include "common/syscalls.h"
#include "policy/needs.h"
#include "policy/ociprofile.h"
#include "policy/policy.h"
#include "state/ocistate.h"
#include "tap.h"

#include <string.h>

static int parse(const char *s, struct oci_msg *m, struct mv_err *e)
{
	memset(e, 0, sizeof(*e));
	return ocistate_parse(s, strlen(s), m, e);
}

static void test_state(void)
{
	struct oci_msg m;
	struct mv_err e;
	ok(parse("{\"ociVersion\":\"1.0.2-dev\",\"fds\":[\"other\",\"seccompFd\"],\"pid\":42,"
		 "\"metadata\":\"x=1, name=web\",\"state\":{\"id\":\"c-1.a_b+c\",\"status\":"
		 "\"creating\",\"pid\":42,\"bundle\":\"/b\"}}",
		 &m, &e) == 0,
	   "runc's message parses");
	ok(!strcmp(m.id, "c-1.a_b+c") && m.pid == 42 && m.seccomp_fd == 1 && m.n_fds == 2,
	   "id, pid, the index of seccompFd among 2 fds");
	ok(!strcmp(m.name, "web") && !strcmp(m.status, "creating") && !strcmp(m.bundle, "/b"),
	   "name from metadata, status, bundle");
	ocistate_free(&m);
	ok(parse("{\"fds\":[\"seccompFd\"],\"pid\":1,\"state\":{\"id\":\"..\",\"pid\":1}}", &m,
		 &e) < 0 &&
	       strstr(e.msg, "state.id"),
	   "an id that is '..' is refused: %s", e.msg);
	ok(parse("{\"fds\":[\"seccompFd\"],\"pid\":1,\"state\":{\"id\":\"a/b\",\"pid\":1}}", &m,
		 &e) < 0,
	   "an id with a slash is refused");
	ok(parse("{\"fds\":[\"x\"],\"pid\":1,\"state\":{\"id\":\"a\",\"pid\":1}}", &m, &e) < 0 &&
	       strstr(e.msg, "seccompFd"),
	   "no seccompFd: refused");
	ok(parse("{\"fds\":[\"seccompFd\"],\"pid\":2,\"state\":{\"id\":\"a\",\"pid\":1}}", &m,
		 &e) == 0 &&
	       m.pid == 1 && m.proc_pid == 2,
	   "a process that is not the init (runc exec): its pid is kept apart from the init's");
	ocistate_free(&m);
	ok(parse("{\"fds\":[\"seccompFd\"],\"state\":{\"id\":\"a\",\"pid\":7}}", &m, &e) == 0 &&
	       m.proc_pid == 7,
	   "no pid: the init's");
	ocistate_free(&m);
	ok(parse("{\"ociVersion\":\"0.2.0\",\"fds\":[\"seccompFd\"],\"pid\":0,\"state\":{"
		 "\"ociVersion\":\"0.2.0\",\"id\":\"cx1\",\"status\":\"running\",\"pid\":0,"
		 "\"bundle\":\".\"}}",
		 &m, &e) == 0 &&
	       m.pid == 0 && m.proc_pid == 0 && !strcmp(m.id, "cx1"),
	   "crun exec's message: no process named (0)");
	ocistate_free(&m);
	ok(parse("{\"fds\":[\"seccompFd\"],\"pid\":\"2\",\"state\":{\"id\":\"a\",\"pid\":1}}",
		 &m, &e) < 0,
	   "a pid that is not a number is refused");
	ok(parse("{\"fds\":[\"seccompFd\"],\"state\":{\"id\":\"a\",\"pid\":-3}}", &m, &e) < 0,
	   "a negative pid is refused");
	ok(parse("[1,2]", &m, &e) < 0 && parse("{", &m, &e) < 0, "not an object, not JSON");
}

static bool notifies(json_t *prof, const char *name)
{
	size_t i, j;
	json_t *r, *n;
	json_array_foreach(json_object_get(prof, "syscalls"), i, r)
	{
		if (strcmp(json_string_value(json_object_get(r, "action")), "SCMP_ACT_NOTIFY"))
			continue;
		json_array_foreach(json_object_get(r, "names"), j, n) if (!strcmp(
		    json_string_value(n), name)) return true;
	}
	return false;
}

static void test_profile(void)
{
	struct policy *pol = policy_default();
	struct needs n;
	needs_compile(pol, false, &n);
	struct mv_err e = {0};
	json_t *p = ociprofile_build(&n, NULL, "/l.sock", "name=a", &e);
	ok(p && !strcmp(json_string_value(json_object_get(p, "listenerPath")), "/l.sock"),
	   "listenerPath set");
	ok(notifies(p, "clone") && notifies(p, "execve") && !notifies(p, "mprotect"),
	   "the default policy notifies lifecycle calls, not mprotect");
	json_decref(p);
	json_t *base = json_pack("{s:s, s:[{s:[ss], s:s}]}", "defaultAction", "SCMP_ACT_ERRNO",
				 "syscalls", "names", "read", "execve", "action", "SCMP_ACT_ALLOW");
	p = ociprofile_build(&n, base, "/l", NULL, &e);
	ok(p && notifies(p, "execve") && !notifies(p, "clone"),
	   "with a base: what it allows is notified, what it denies stays denied");
	json_decref(p);
	json_decref(base);
	ok(!ociprofile_build(&n, json_object(), "/l", NULL, &e) && strstr(e.msg, "defaultAction"),
	   "a base without defaultAction is refused");
	needs_free(&n);
	policy_free(pol);
}

/* The policy a container asks for (memvisor.policy): from the state's
 * annotations or the listener metadata, refused when bad or when the two
 * disagree. */
static void test_policy_pick(void)
{
	struct oci_msg m;
	struct mv_err e;
#define MSG(ANN, MD)                                                                               \
	"{\"fds\":[\"seccompFd\"],\"pid\":5," MD "\"state\":{\"id\":\"c\",\"pid\":5" ANN "}}"
	ok(parse(MSG("", ""), &m, &e) == 0 && m.policy[0] == '\0', "none asked: the default");
	ocistate_free(&m);
	ok(parse(MSG(",\"annotations\":{\"memvisor.policy\":\"small\",\"x\":\"y\"}", ""), &m, &e) ==
		   0 &&
	       !strcmp(m.policy, "small"),
	   "from the annotations");
	ocistate_free(&m);
	ok(parse(MSG("", "\"metadata\":\"name=web memvisor.policy=big\","), &m, &e) == 0 &&
	       !strcmp(m.policy, "big") && !strcmp(m.name, "web"),
	   "from the metadata, beside the name");
	ocistate_free(&m);
	ok(parse(MSG(",\"annotations\":{\"memvisor.policy\":\"big\"}",
		     "\"metadata\":\"memvisor.policy=big\","),
		 &m, &e) == 0 &&
	       !strcmp(m.policy, "big"),
	   "both, the same");
	ocistate_free(&m);
	ok(parse(MSG(",\"annotations\":{\"memvisor.policy\":\"small\"}",
		     "\"metadata\":\"memvisor.policy=big\","),
		 &m, &e) < 0 &&
	       strstr(e.msg, "small") && strstr(e.msg, "big"),
	   "both, different: refused, naming both");
	ok(parse(MSG(",\"annotations\":{\"memvisor.policy\":\"../etc/x\"}", ""), &m, &e) < 0 &&
	       strstr(e.msg, "policy name"),
	   "a path is refused, not ignored");
	ok(parse(MSG("", "\"metadata\":\"memvisor.policy=..\","), &m, &e) < 0,
	   "'..' from the metadata is refused");
	ok(parse(MSG(",\"annotations\":{\"memvisor.policy\":7}", ""), &m, &e) < 0,
	   "not a string: refused");
	ok(parse(MSG("", "\"metadata\":\"memvisor.policy=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","),
		 &m, &e) < 0,
	   "65 characters: refused");
#undef MSG
}

int main(void)
{
	syscalls_init();
	test_state();
	test_policy_pick();
	test_profile();
	return tap_done();
}
