/* The seccomp section of an OCI config (runtime spec, config-linux.md
 * "Seccomp") that makes a runtime hand `memvisor agent` what a policy
 * needs: SCMP_ACT_NOTIFY for the calls of struct needs, listenerPath set,
 * everything else left to a base profile (podman's default, or
 * allow-all). Pure.
 *
 * The OCI rules apply one condition list to every architecture, while
 * needs are per ABI (i386's mmap takes a pointer): a call whose terms
 * differ between ABIs, or that the base allows unconditionally while the
 * policy wants it only for some arguments, is notified whole. Notifying
 * more is only slower, never wrong: the agent decides each call. A call
 * the base denies stays denied (never notified: the agent would let it
 * through); a base rule that allows a call for some arguments becomes
 * a notify rule for those arguments. */
#ifndef MV_OCIPROFILE_H
#define MV_OCIPROFILE_H

#include "common/err.h"
#include "policy/needs.h"

#include <jansson.h>

/* The profile: base (a profile object, or NULL for allow-all; not
 * changed) with n's notify rules, listener as listenerPath and metadata
 * (may be NULL) as listenerMetadata. A new reference, or NULL with why in
 * err when base is not a profile. */
json_t *ociprofile_build(const struct needs *n, const json_t *base, const char *listener,
			 const char *metadata, struct mv_err *err);

#endif
