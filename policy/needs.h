/* What the BPF filter must notify for a policy: the policy compiled down
 * to argument comparisons, per ABI and syscall. Everything not listed is
 * allowed in the kernel and never reaches the supervisor.
 *
 * A syscall is notified always ("all"), never, or when one of its terms
 * holds; a term is an AND of comparisons of argument registers, one per
 * argument (what one libseccomp rule can say). Terms over-approximate:
 * the supervisor decides every notified call exactly, so notifying a call
 * the policy then allows is only slower, never wrong.
 *
 * The launch filter is fixed for the life of the command. A policy loaded
 * at run time is accepted only if the launch filter notifies everything it
 * needs (needs_covered()). Pure. */
#ifndef MV_NEEDS_H
#define MV_NEEDS_H

#include "common/syscalls.h"
#include "policy/policy.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum needs_op { NEEDS_EQ, NEEDS_NE, NEEDS_LT, NEEDS_LE, NEEDS_GT, NEEDS_GE, NEEDS_MASKED_EQ };

struct needs_cmp {
	uint8_t arg;
	uint8_t op;
	uint64_t mask; /* NEEDS_MASKED_EQ only */
	uint64_t datum;
};

#define NEEDS_MAX_CMP 6
#define NEEDS_WHY     48

struct needs_term {
	uint8_t n; /* 0: always */
	struct needs_cmp c[NEEDS_MAX_CMP];
	char why[NEEDS_WHY]; /* what wants it: "wx", a rule name, "limits.max_regions" */
};

struct needs_sc {
	bool all;
	char all_why[NEEDS_WHY];
	struct needs_term *t;
	size_t n, cap;
};

struct needs {
	bool notify_all;
	bool refuse_io_uring; /* see needs_refuse_io_uring */
	struct needs_sc sc[MV_ABI_COUNT][MV_SC_COUNT];
};

/* Compile pol (with --notify-all if notify_all). Never fails. */
void needs_compile(const struct policy *pol, bool notify_all, struct needs *out);
void needs_free(struct needs *n);

/* Does launch notify everything want needs? 0, or -1 with what is
 * missing described in buf. */
int needs_covered(const struct needs *launch, const struct needs *want, char *buf, size_t len);

/* Does a call match what n notifies? (The filter's behaviour, for tests
 * and for the `policy check --explain` listing.) */
struct mv_call;
bool needs_match(const struct needs *n, const struct mv_call *c);

/* Must io_uring be refused? IORING_OP_MADVISE runs madvise in the kernel,
 * out of the filter's sight, so where the policy has a say about madvise
 * the io_uring calls fail with EPERM. Not for --notify-all alone: a
 * statistics run keeps io_uring, and a policy set later that would need
 * it refused is refused itself (needs_covered). */
bool needs_refuse_io_uring(const struct needs *n);

/* Print, per ABI, which calls are notified and when. */
void needs_describe(const struct needs *n, FILE *f);

/* How the filter passes memory call sc of the native ABI (x86_64):
 * always, when a condition holds, or never (decided in the kernel);
 * NEEDS_NA when sc is no memory call there. */
enum needs_when { NEEDS_NA, NEEDS_NEVER, NEEDS_SOME, NEEDS_ALWAYS };
enum needs_when needs_when(const struct needs *n, enum mv_sc sc);

/* Which memory calls of the native ABI (x86_64) the filter leaves in the
 * kernel, where the supervisor never sees, decides or counts them:
 * {"notify_all": B, "never": [NAME...], "some": [{"syscall": NAME,
 * "when": [WHY...]}]}; "some" are seen only when a condition holds
 * ("when": what wants it: "wx", a rule name, a limit). */
json_t *needs_uncounted_json(const struct needs *n);

#endif
