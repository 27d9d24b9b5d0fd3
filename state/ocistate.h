/* The message an OCI runtime sends to a seccomp agent (runtime spec,
 * config-linux.md "Seccomp", listenerPath): the container process state,
 * JSON, with the listener fd passed beside it by SCM_RIGHTS:
 *
 *   {"ociVersion":"1.0.2","fds":["seccompFd"],"pid":4242,
 *    "metadata":"name=web memvisor.policy=small",
 *    "state":{"ociVersion":"1.0.2","id":"c1","status":"creating",
 *             "pid":4242,"bundle":"/path/to/bundle","annotations":{}}}
 *
 * The parser trusts nothing in it: it comes from the socket, and the
 * agent must survive any message (tests/fuzz/fuzz_ocistate.c). Pure. */
#ifndef MV_OCISTATE_H
#define MV_OCISTATE_H

#include "common/err.h"

#include <stddef.h>
#include <sys/types.h>

/* Container ids are file names under the agent (ID.sock): runc's rule
 * ([A-Za-z0-9_+.-]), not "." or "..", at most this long. */
#define OCI_ID_MAX   128
#define OCI_NAME_MAX 64

/* The annotation (state.annotations) and the metadata word
 * (KEY=NAME) that pick a container's policy. */
#define OCI_POLICY_KEY "memvisor.policy"

struct oci_msg {
	char id[OCI_ID_MAX + 1];
	char name[OCI_NAME_MAX + 1];   /* metadata's name=NAME, or "" */
	char policy[OCI_NAME_MAX + 1]; /* OCI_POLICY_KEY's NAME, or "" */
	pid_t pid;		       /* the container's init (state.pid); 0: not said */
	pid_t proc_pid;		       /* the process the fds came from ("pid"): the
					* init, or one runc exec starts; 0: not said
					* (crun exec) */
	int seccomp_fd;		       /* the index of "seccompFd" in fds */
	size_t n_fds;		       /* how many fds the message says it carries */
	char status[16];	       /* state.status: creating, created, running */
	char *bundle;		       /* malloc'd, or NULL */
	char *metadata;		       /* malloc'd, or NULL */
};

/* Parse len bytes of buf. 0, or -EINVAL with why in err (the message is
 * refused; out holds nothing to free). */
int ocistate_parse(const char *buf, size_t len, struct oci_msg *out, struct mv_err *err);
void ocistate_free(struct oci_msg *m);

/* Is s a container id the agent takes (see OCI_ID_MAX)? */
int ocistate_id_ok(const char *s);

#endif
