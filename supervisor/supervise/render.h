/* JSON renderings shared by the control socket and --stats-json, so both
 * speak the same shapes (docs/protocol.md). Every function returns a new
 * reference. */
#ifndef MV_RENDER_H
#define MV_RENDER_H

#include "state/call.h"
#include "state/proc.h"

#include <jansson.h>

/* "0x7f12..." */
json_t *render_hex(uint64_t v);

/* The named arguments of a call: addresses as hex strings, prot as "rw-". */
json_t *render_call_args(const struct mv_call *c);

/* argv array from the NUL-separated cmdline. */
json_t *render_cmdline(const struct proc *p);

/* Counters: calls by syscall and verdict, bytes, ABIs, service time. */
json_t *render_stats(const struct proc_stats *s);

/* Every process of t, exited and running, rendered by one(), and the
 * totals of all (folded ones included). Under the lock that guards t. */
void render_procs(struct proctab *t, json_t *(*one)(const struct proc *p), json_t **list,
		  json_t **totals);

/* The percentiles of a latency histogram, in ns. */
json_t *render_hist(const struct hist *h);

/* "rwx" from PROT_* bits, "---" for PROT_NONE. */
const char *render_prot(uint64_t prot, char buf[4]);

#endif
