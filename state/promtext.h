/* Prometheus text expositions (format 0.0.4) put together: labels added
 * to every sample, and several expositions merged into one in which each
 * family is declared once (the format wants a family's samples together,
 * after its one # HELP and # TYPE). For `run --metrics-file` (a `name`
 * label) and the agent's node-wide metrics (a `container`, `name` and
 * `policy` label on each container's series). Pure. */
#ifndef MV_PROMTEXT_H
#define MV_PROMTEXT_H

#include <stddef.h>

/* `key="value"` with the value escaped as the format asks (\, " and
 * newline), appended to *buf (malloc'd, *len bytes), with a comma before
 * it when *buf is not empty. */
void promtext_label(char **buf, size_t *len, const char *key, const char *value);

/* Merge n expositions: texts[i]'s samples get labels[i] (from
 * promtext_label; NULL or "" for none) before their own labels. A family
 * is declared where it first appears, its samples from every text follow
 * in text order. Lines that are neither # HELP, # TYPE nor samples are
 * dropped. malloc'd. */
char *promtext_merge(const char *const *texts, const char *const *labels, size_t n);

#endif
