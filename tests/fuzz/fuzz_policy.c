/* libFuzzer harness: policy text through the parser and validator
 * (policy_parse, which reports every error with its line and column from
 * jpos), then a valid policy's canonical JSON back through the parser,
 * which must accept it (policy.h: "parsing it back gives the same
 * policy"). */
#include "common/syscalls.h"
#include "policy/jpos.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_roundtrip(const struct policy *pol)
{
	json_t *j = policy_to_json(pol);
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!text)
		abort();
	struct policy *again = NULL;
	struct pol_diag d = {0};
	if (policy_parse(text, strlen(text), "canonical", &again, &d) < 0) {
		fprintf(stderr, "canonical form refused: %s\n%s\n", d.n ? d.msg[0] : "?", text);
		abort();
	}
	pol_diag_free(&d);
	policy_free(again);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		if (syscalls_init() < 0)
			abort();
		ready = 1;
	}
	const char *text = (const char *)data;
	struct jpos jp = {0};
	jpos_scan(text, size, &jp);
	for (size_t i = 0; i < jp.n; i++)
		if (jpos_find(&jp, jp.v[i].ptr) == NULL)
			abort();
	jpos_free(&jp);

	struct policy *pol = NULL;
	struct pol_diag d = {0};
	if (policy_parse(text, size, "fuzz.json", &pol, &d) == 0)
		check_roundtrip(pol);
	pol_diag_free(&d);
	policy_free(pol);
	return 0;
}
