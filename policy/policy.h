/* The policy: what a policy file says, parsed and validated
 * (docs/policy.md is the reference for the language).
 *
 * Pure code: no event loop, no globals, no I/O other than reading the
 * policy file itself. A struct policy is immutable once built; the
 * supervisor swaps whole policies and frees the old one.
 *
 * Errors: functions that can fail return 0 or -errno. Validation never
 * stops at the first problem: every error found goes into a struct
 * pol_diag as one "FILE:LINE:COL: /json/pointer: message" line. */
#ifndef MV_POLICY_H
#define MV_POLICY_H

#include "common/err.h"
#include "common/syscalls.h"
#include "state/stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* x86-64 pages: the kernel accounts mappings in whole pages. */
#define POL_PAGE 4096ULL

/* The highest size a limit may name: the x86-64 user address space with
 * 5-level paging (2^56 bytes). Anything larger cannot be reached. */
#define POL_MAX_SIZE (1ULL << 56)

enum pol_backing { POL_BACKING_ANY, POL_BACKING_ANON, POL_BACKING_FILE };

enum pol_wx { POL_WX_OFF, POL_WX_LOG, POL_WX_DENY };

/* One rule: the calls it matches and what to do with them. A condition
 * that is absent matches everything. */
struct pol_rule {
	char *name;	   /* the rule's "name", or "rules[N]" */
	uint64_t syscalls; /* 1 << enum mv_sc, for every syscall named */
	bool has_prot;
	uint64_t prot_has, prot_lacks; /* PROT_* bits that must be set / clear */
	bool has_flags;
	uint64_t flags_has, flags_lacks; /* bits of the call's flags argument */
	bool has_len;
	uint64_t len_min, len_max; /* inclusive */
	enum pol_backing backing;  /* mmap/mmap2 only */
	enum mv_verdict action;
	int err; /* errno for MV_V_DENY */
};

/* 0 means "no limit" everywhere. */
struct pol_limits {
	uint64_t max_mapped;	  /* bytes mapped by one process (its VmSize) */
	uint64_t max_mapped_tree; /* bytes mapped by all supervised processes together */
	uint64_t max_mapping;	  /* bytes one call may map or remap to */
	uint64_t max_regions;	  /* regions (VMAs) of one process */
};

struct policy {
	char *source;	      /* the file it was read from, or "(built-in default)" */
	char *description;    /* optional "description", or NULL */
	enum mv_verdict dflt; /* for memory calls no rule matches */
	int dflt_err;	      /* errno when dflt is MV_V_DENY */
	struct pol_rule *rules;
	size_t n_rules;
	struct pol_limits lim;
	enum pol_wx wx;
	char **wx_allow;      /* executables that may make memory W+X, as written */
	char **wx_allow_real; /* realpath() of each at load time, or NULL */
	size_t n_wx_allow;
	bool wx_mdwe; /* allow PR_SET_MDWE to back "deny" (default true) */
};

struct pol_diag {
	char **msg;
	size_t n, cap;
};

void pol_diag_free(struct pol_diag *d);

/* Add one message, printf-style (used by the parser; public for callers
 * that report I/O errors in the same list). */
void pol_diag_add(struct pol_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse and validate a policy from text; file names it in messages.
 * 0 with *out set, or -EINVAL with every problem in d. */
int policy_parse(const char *text, size_t len, const char *file, struct policy **out,
		 struct pol_diag *d);

/* Read and parse a file. -errno when it cannot be read (with a message in
 * d), -EINVAL when it is not a valid policy. */
/* Read a policy file's text (at most 1 MiB) into *out (malloc'd).
 * regular_only: open O_NONBLOCK and accept a regular file only, for a
 * caller that must never block (the main loop's `policy set`: a FIFO's
 * open waits for a writer, its read for data); otherwise pipes and FIFOs
 * are read too (`run --policy <(...)`). 0, or -errno with the reason in d. */
int policy_read_file(const char *path, bool regular_only, char **out, size_t *len,
		     struct pol_diag *d);

int policy_load(const char *path, struct policy **out, struct pol_diag *d);

/* The built-in policy used without --policy: allow everything, no limits,
 * W^X off. Never fails. */
struct policy *policy_default(void);

void policy_free(struct policy *p);

/* The policy in its canonical JSON form (a new reference): every key
 * present, sizes as integers, rules with their resolved names. Parsing it
 * back gives the same policy. */
json_t *policy_to_json(const struct policy *p);

/* Does the rule match the call's arguments? (Not its syscall: the caller
 * checks rule->syscalls.) */
struct mv_call;
bool policy_rule_matches(const struct pol_rule *r, const struct mv_call *c);

/* Is exe one of the policy's wx_allow executables? */
bool policy_wx_allowed(const struct policy *p, const char *exe);

/* What the launcher set up for W^X, which a policy set later cannot add:
 * the command and its descendants were started with it, or not. */
struct pol_launch_setup {
	bool landlock_proc_mem; /* Landlock refuses writes under /proc/PID (mem) */
	bool rie_guarded;	/* READ_IMPLIES_EXEC was cleared at launch, and
				 * setting it refused by every policy since */
};

/* What a policy pol, set at run time, would rely on that the launch set-up
 * does not give. Pure. Returns 0 when nothing, -EINVAL with a message in
 * msg (len bytes) naming each gap it would leave open. */
int policy_runtime_gaps(const struct pol_launch_setup *launch, const struct policy *pol,
			struct mv_err *err);

/* Does the policy need the arguments of this call to decide it (so that
 * the i386 old_mmap, whose arguments are in memory, must be refused)? */
bool policy_needs_args(const struct policy *p, enum mv_sc sc);

#endif
