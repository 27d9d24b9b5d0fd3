/* libFuzzer harness: the state message an OCI runtime sends to
 * `memvisor agent` with a seccomp listener (ocistate_parse). Whatever
 * the bytes, the parser must return, and what it accepts must hold a
 * valid id, pids (0: not said), the index of an fd the message names,
 * and a valid policy name if any. */
#include "state/ocistate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_msg m;
	struct mv_err err = {0};
	if (ocistate_parse((const char *)data, size, &m, &err) < 0) {
		if (!err.msg[0])
			abort(); /* a refusal always says why */
		return 0;
	}
	/* A pid of 0 is "not said" (crun exec): the agent then takes the
	 * message for an exec into a container it already supervises. */
	if (!ocistate_id_ok(m.id) || m.pid < 0 || m.proc_pid < 0 || m.seccomp_fd < 0 ||
	    (size_t)m.seccomp_fd >= m.n_fds || (m.name[0] && !ocistate_id_ok(m.name)) ||
	    (m.policy[0] && (!ocistate_id_ok(m.policy) || strlen(m.policy) > OCI_NAME_MAX)))
		abort();
	ocistate_free(&m);
	return 0;
}
