/* Unit tests of policy files: parsing, validation messages and their
 * positions, the canonical form, JSON pointers. */
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/decide.h"
#include "policy/jpos.h"
#include "policy/names.h"
#include "policy/policy.h"
#include "tests/unit/tap.h"

#include <string.h>

/* Parse text; return the first message (or "" when valid). */
static const char *first_error(const char *text, struct policy **out, struct pol_diag *d)
{
	memset(d, 0, sizeof(*d));
	int rc = policy_parse(text, strlen(text), "p.json", out, d);
	if (rc == 0)
		return "";
	return d->n ? d->msg[0] : "(no message)";
}

/* Each bad policy, and the start of its first error message. */
static const struct {
	const char *what, *text, *want;
} bad[] = {
	{"invalid JSON", "{\"version\": 1,\n  \"wx\": }", "p.json:2:9: /wx: invalid JSON: unexpected token"},
	{"empty file", "", "p.json:1:1: /: invalid JSON"},
	{"duplicate key", "{\"version\": 1, \"wx\": \"off\", \"wx\": \"deny\"}", "p.json:1:32: /wx: invalid JSON: duplicate object key"},
	{"not an object", "[1]", "p.json:1:1: /: a policy is a JSON object, got an array"},
	{"missing version", "{}", "p.json:1:1: /: missing key \"version\""},
	{"bad version", "{\"version\": 2}", "p.json:1:13: /version: unsupported version 2"},
	{"unknown key", "{\"version\": 1,\n \"wxx\": \"deny\"}", "p.json:2:2: /wxx: unknown key \"wxx\""},
	{"wrong type", "{\"version\": 1, \"rules\": {}}", "p.json:1:25: /rules: expected an array of rules, got an object"},
	{"unknown syscall",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\", \"mmapp\"], \"action\": \"deny\"}]}",
	 "p.json:1:48: /rules/0/syscalls/1: unknown syscall \"mmapp\""},
	{"unknown errno",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"], \"action\": \"deny\", \"errno\": \"ENOPE\"}]}",
	 "p.json:1:76: /rules/0/errno: unknown errno \"ENOPE\""},
	{"errno without deny",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"], \"action\": \"log\", \"errno\": \"EPERM\"}]}",
	 "p.json:1:66: /rules/0/errno: \"errno\" only goes with action \"deny\""},
	{"unknown action", "{\"version\": 1, \"default\": \"block\"}", "p.json:1:27: /default: unknown action \"block\""},
	{"missing action", "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"]}]}", "p.json:1:26: /rules/0: missing key \"action\""},
	{"negative size", "{\"version\": 1, \"limits\": {\"max_mapped\": -5}}", "p.json:1:41: /limits/max_mapped: a size cannot be negative (-5)"},
	{"absurd size", "{\"version\": 1, \"limits\": {\"max_mapped\": \"1000000T\"}}", "p.json:1:41: /limits/max_mapped: 976.6 PiB is more than the 64.0 PiB x86-64 address space"},
	{"overflowing size", "{\"version\": 1, \"limits\": {\"max_mapped_tree\": \"99999999999T\"}}", "p.json:1:46: /limits/max_mapped_tree: size \"99999999999T\" is too large"},
	{"bad size string", "{\"version\": 1, \"limits\": {\"max_mapping\": \"12X\"}}", "p.json:1:42: /limits/max_mapping: \"12X\" is not a size"},
	{"size below a page", "{\"version\": 1, \"limits\": {\"max_mapped\": 100}}", "p.json:1:41: /limits/max_mapped: must be at least 4.0 KiB"},
	{"fractional size", "{\"version\": 1, \"limits\": {\"max_mapped\": 1.5}}", "p.json:1:41: /limits/max_mapped: expected a size"},
	{"zero regions", "{\"version\": 1, \"limits\": {\"max_regions\": 0}}", "p.json:1:42: /limits/max_regions: must be from 1 to"},
	{"huge regions", "{\"version\": 1, \"limits\": {\"max_regions\": 9999999999}}", "p.json:1:42: /limits/max_regions: must be from 1 to"},
	{"condition the syscall lacks",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"munmap\"], \"prot_has\": [\"EXEC\"], \"action\": \"deny\"}]}",
	 "p.json:1:51: /rules/0/prot_has: munmap has no prot argument"},
	{"unknown prot name",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"], \"prot_has\": [\"EXECUTE\"], \"action\": \"deny\"}]}",
	 "p.json:1:62: /rules/0/prot_has/0: unknown PROT_ name \"EXECUTE\""},
	{"mixed flag families",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\", \"mremap\"], \"flags_has\": [\"FIXED\"], \"action\": \"deny\"}]}",
	 "p.json:1:59: /rules/0/flags_has: the rule's syscalls name their flags differently"},
	{"has and lacks",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mprotect\"], \"prot_has\": [\"EXEC\"], \"prot_lacks\": [\"EXEC\"], \"action\": \"deny\"}]}",
	 "p.json:1:75: /rules/0/prot_lacks: EXEC is in both prot_has and prot_lacks"},
	{"backing on mprotect",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mprotect\"], \"backing\": \"anon\", \"action\": \"deny\"}]}",
	 "p.json:1:53: /rules/0/backing: mprotect cannot tell anonymous from file-backed memory"},
	{"length range upside down",
	 "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"], \"length_min\": \"2M\", \"length_max\": \"1M\", \"action\": \"deny\"}]}",
	 "p.json:1:63: /rules/0/length_min: length_min (2097152) is above length_max (1048576)"},
	{"empty syscalls", "{\"version\": 1, \"rules\": [{\"syscalls\": [], \"action\": \"deny\"}]}",
	 "p.json:1:39: /rules/0/syscalls: expected a non-empty array"},
	{"duplicate rule name",
	 "{\"version\": 1, \"rules\": [{\"name\": \"a\", \"syscalls\": [\"mmap\"], \"action\": \"deny\"}, {\"name\": \"a\", \"syscalls\": [\"brk\"], \"action\": \"deny\"}]}",
	 "p.json:1:90: /rules/1/name: rule name \"a\" is also the name of rules[0]"},
	{"bad wx", "{\"version\": 1, \"wx\": \"strict\"}", "p.json:1:22: /wx: unknown wx mode \"strict\""},
	{"relative wx_allow", "{\"version\": 1, \"wx\": \"deny\", \"wx_allow\": [\"node\"]}", "p.json:1:43: /wx_allow/0: \"node\" is not an absolute path"},
	{"key with escapes", "{\"version\": 1, \"a/b~\": 1}", "p.json:1:16: /a~1b~0: unknown key \"a/b~\""},
	{"unicode column", "{\"version\": 1, \"description\": \"\xc3\xa9\xc3\xa9\", \"wx\": 3}", "p.json:1:43: /wx: expected a string, got an integer"},
};

static void test_bad(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct policy *p = NULL;
		struct pol_diag d;
		const char *got = first_error(bad[i].text, &p, &d);
		bool good = strncmp(got, bad[i].want, strlen(bad[i].want)) == 0 && !p;
		ok(good, "bad policy: %s", bad[i].what);
		if (!good)
			printf("#   got:  %s\n#   want: %s\n", got, bad[i].want);
		pol_diag_free(&d);
		policy_free(p);
	}
}

static void test_every_error(void)
{
	const char *text = "{\"version\": 3, \"bogus\": 1, \"limits\": {\"max_mapped\": -1, "
			   "\"max_regions\": \"x\"}, \"wx\": \"maybe\"}";
	struct policy *p = NULL;
	struct pol_diag d;
	first_error(text, &p, &d);
	is_u64(d.n, 5, "every error is reported, not only the first");
	pol_diag_free(&d);
}

static void test_good(void)
{
	const char *text =
		"{\n"
		"  \"version\": 1,\n"
		"  \"description\": \"test\",\n"
		"  \"default\": {\"action\": \"deny\", \"errno\": \"ENOMEM\"},\n"
		"  \"rules\": [\n"
		"    {\"name\": \"small-anon\", \"syscalls\": [\"mmap\"], \"backing\": \"anon\",\n"
		"     \"length_max\": \"64K\", \"prot_lacks\": [\"PROT_EXEC\"], \"action\": \"allow\"},\n"
		"    {\"syscalls\": [\"mremap\"], \"flags_has\": [\"maymove\"], \"action\": \"log\"},\n"
		"    {\"syscalls\": [\"clone\"], \"flags_lacks\": [\"VM\"], \"action\": \"kill\"}\n"
		"  ],\n"
		"  \"limits\": {\"max_mapped\": \"512M\", \"max_mapped_tree\": 1073741824,\n"
		"             \"max_mapping\": \"1\", \"max_regions\": 100},\n"
		"  \"wx\": \"deny\", \"wx_allow\": [\"/usr/bin/node\"], \"wx_mdwe\": false\n"
		"}\n";
	struct policy *p = NULL;
	struct pol_diag d;
	const char *err = first_error(text, &p, &d);
	ok(p && !*err, "a policy using every key parses");
	if (!p) {
		printf("#   %s\n", err);
		pol_diag_free(&d);
		return;
	}
	ok(p->dflt == MV_V_DENY && p->dflt_err == ENOMEM, "default with errno");
	is_u64(p->n_rules, 3, "three rules");
	ok(strcmp(p->rules[0].name, "small-anon") == 0, "rule name kept");
	ok(strcmp(p->rules[1].name, "rules[1]") == 0, "unnamed rule gets rules[N]");
	ok(p->rules[0].syscalls == ((1ULL << MV_SC_mmap) | (1ULL << MV_SC_mmap2)),
	   "a rule on mmap covers mmap2");
	ok(p->rules[0].backing == POL_BACKING_ANON && p->rules[0].len_max == 65536 &&
		   p->rules[0].prot_lacks == 4,
	   "conditions parsed (prefix and case ignored)");
	ok(p->rules[1].flags_has == 1 && p->rules[2].flags_lacks == 0x100, "flag families");
	ok(p->lim.max_mapped == 512ULL << 20 && p->lim.max_mapped_tree == 1ULL << 30 &&
		   p->lim.max_mapping == 1 && p->lim.max_regions == 100,
	   "limits parsed");
	ok(p->wx == POL_WX_DENY && p->n_wx_allow == 1 && !p->wx_mdwe, "wx keys parsed");
	/* The canonical form parses back to the same canonical form. */
	json_t *j = policy_to_json(p);
	char *s1 = json_dumps(j, JSON_SORT_KEYS);
	json_decref(j);
	struct policy *q = NULL;
	struct pol_diag d2;
	const char *err2 = first_error(s1, &q, &d2);
	ok(q && !*err2, "the canonical form parses");
	if (q) {
		j = policy_to_json(q);
		char *s2 = json_dumps(j, JSON_SORT_KEYS);
		json_decref(j);
		ok(strcmp(s1, s2) == 0, "canonical form round-trips");
		free(s2);
	} else {
		printf("#   %s\n", err2);
	}
	free(s1);
	policy_free(q);
	pol_diag_free(&d2);
	policy_free(p);
	pol_diag_free(&d);
}

static void test_defaults(void)
{
	struct policy *p = policy_default();
	ok(p->dflt == MV_V_ALLOW && p->wx == POL_WX_OFF && !p->n_rules && !p->lim.max_mapped,
	   "the built-in default allows everything");
	policy_free(p);
	struct pol_diag d;
	const char *e = first_error("{\"version\": 1}", &p, &d);
	ok(p && !*e && p->wx_mdwe, "the smallest policy is {\"version\": 1}");
	/* Its canonical form names the absent limits as null. */
	json_t *j = policy_to_json(p);
	char *text = json_dumps(j, 0);
	json_decref(j);
	policy_free(p);
	pol_diag_free(&d);
	e = first_error(text, &p, &d);
	ok(p && !*e && !p->lim.max_mapped && !p->lim.max_regions,
	   "a canonical form with null limits parses back");
	free(text);
	policy_free(p);
	pol_diag_free(&d);
}

static void test_jpos(void)
{
	struct jpos jp = {0};
	const char *t = "{\"a\": [1, {\"b/c\": \"x\"}],\n \"d\\u00e9\": true}";
	ok(jpos_scan(t, strlen(t), &jp) == 0, "scan valid JSON");
	const struct jpos_entry *e = jpos_find(&jp, "/a/1/b~1c");
	ok(e && e->line == 1 && e->col == 19 && e->key_col == 12, "pointer with escape, value and key columns");
	e = jpos_find(&jp, "/d\xc3\xa9");
	ok(e && e->line == 2 && e->key_col == 2 && e->col == 13, "unicode escape in a key");
	jpos_free(&jp);
	/* Cut short, in a buffer of its own size (an ASan build sees a read
	 * past it). */
	static const char cut[] = "{\"a\": [1, {\"b\": 2";
	char *exact = malloc(sizeof(cut) - 1);
	memcpy(exact, cut, sizeof(cut) - 1);
	ok(jpos_scan(exact, sizeof(cut) - 1, &jp) < 0 && jpos_find(&jp, "/a/1/b"),
	   "a truncated text is an error, what was scanned stays usable");
	jpos_free(&jp);
	free(exact);
	char *c = jpos_child("/x", "~/");
	ok(strcmp(c, "/x/~0~1") == 0, "jpos_child escapes ~ and /");
	free(c);
}

static void test_names(void)
{
	int e;
	uint64_t b;
	ok(names_errno("ENOMEM", &e) == 0 && e == ENOMEM, "errno by name");
	ok(names_errno("enomem", &e) == 0 && e == ENOMEM, "errno names are case-insensitive");
	ok(names_errno("ENOTANERRNO", &e) < 0, "unknown errno");
	ok(names_flag(NAMES_MAP, "MAP_ANONYMOUS", &b) == 0 && b == 0x20, "MAP_ prefix accepted");
	ok(names_flag(NAMES_MAP, "anon", &b) == 0 && b == 0x20, "ANON alias");
	ok(names_flag(NAMES_SHM, "EXEC", &b) == 0 && b == 0100000, "SHM_EXEC");
	ok(names_flag(NAMES_PROT, "MAYBE", &b) < 0, "unknown flag");
	char buf[128];
	ok(strcmp(names_flags_format(NAMES_MAP, 0x22, buf, sizeof(buf)), "MAP_PRIVATE|MAP_ANONYMOUS") ==
	       0,
	   "flags by name: the mapping type, then bits, the first spelling");
	ok(strcmp(names_flags_format(NAMES_MAP, 0x3 | 0x10, buf, sizeof(buf)),
		  "MAP_SHARED_VALIDATE|MAP_FIXED") == 0,
	   "MAP_SHARED_VALIDATE is a type, not SHARED and PRIVATE");
	ok(strcmp(names_flags_format(NAMES_MREMAP, 0x1 | 0x100, buf, sizeof(buf)),
		  "MREMAP_MAYMOVE|0x100") == 0,
	   "bits without a name in hex, last");
	ok(strcmp(names_flags_format(NAMES_MLOCK, 0, buf, sizeof(buf)), "0") == 0, "no bits: 0");
	ok(strcmp(names_flags_format(NAMES_NONE, 0x5, buf, sizeof(buf)), "0x5") == 0,
	   "no family: hex");
}

/* pkey_mprotect is mprotect with a key: a rule on mprotect that did not
 * cover it would be a way around the rule. */
static void test_mprotect_covers_pkey(void)
{
	const char *text = "{\"version\": 1, \"rules\": [{\"syscalls\": [\"mprotect\"], "
			   "\"prot_has\": [\"EXEC\"], \"action\": \"deny\"}]}";
	struct policy *p = NULL;
	struct pol_diag d;
	const char *err = first_error(text, &p, &d);
	ok(p && !*err, "a rule on mprotect parses");
	if (p)
		ok(p->rules[0].syscalls == ((1ULL << MV_SC_mprotect) | (1ULL << MV_SC_pkey_mprotect)),
		   "a rule on mprotect covers pkey_mprotect");
	pol_diag_free(&d);
	policy_free(p);
}

static struct policy *parse_ok(const char *text)
{
	struct policy *p = NULL;
	struct pol_diag d;
	first_error(text, &p, &d);
	pol_diag_free(&d);
	return p;
}

static void test_runtime_gaps(void)
{
	struct policy *deny = parse_ok("{\"version\": 1, \"wx\": \"deny\"}");
	struct policy *log = parse_ok("{\"version\": 1, \"wx\": \"log\"}");
	struct mv_err e = {0};
	const char *msg = e.msg;
	struct pol_launch_setup full = {true, true}, none = {false, false},
				no_mem = {false, true}, no_rie = {true, false};
	ok(policy_runtime_gaps(&full, deny, &e) == 0,
	   "gaps: deny over a deny launch is enforceable");
	ok(policy_runtime_gaps(&none, log, &e) == 0, "gaps: log refuses nothing");
	ok(policy_runtime_gaps(&none, deny, &e) == -EINVAL &&
	       strstr(msg, "/proc/PID/mem") && strstr(msg, "READ_IMPLIES_EXEC"),
	   "gaps: deny over an off launch names both gaps");
	ok(policy_runtime_gaps(&no_mem, deny, &e) == -EINVAL &&
	       strstr(msg, "/proc/PID/mem") && !strstr(msg, "READ_IMPLIES_EXEC"),
	   "gaps: without Landlock only /proc/PID/mem");
	ok(policy_runtime_gaps(&no_rie, deny, &e) == -EINVAL &&
	       !strstr(msg, "/proc/PID/mem") && strstr(msg, "READ_IMPLIES_EXEC"),
	   "gaps: READ_IMPLIES_EXEC allowed since launch");
	policy_free(deny);
	policy_free(log);
}

static void test_region_delta(void)
{
	static const struct {
		enum mv_sc sc;
		uint64_t a0, a1, a2, a3;
		uint32_t want;
		const char *what;
	} cases[] = {
	    {MV_SC_mbind, 0x1000, 4096, 4, 0, 2, "mbind splits at both ends"},
	    {MV_SC_set_mempolicy_home_node, 0x1000, 4096, 0, 0, 2, "set_mempolicy_home_node"},
	    {MV_SC_mseal, 0x1000, 4096, 0, 0, 2, "mseal"},
	    {MV_SC_io_setup, 1, 0, 0, 0, 1, "io_setup maps a ring"},
	    {MV_SC_prctl, 0x53564d41, 0, 0, 0, 2, "prctl(PR_SET_VMA)"},
	    {MV_SC_prctl, 15, 0, 0, 0, 0, "prctl(PR_SET_NAME) makes no region"},
	    {MV_SC_ioctl, 3, 0xc020aa00, 0, 0, 2, "UFFDIO_REGISTER"},
	    {MV_SC_ioctl, 3, 0x10000c020aa00ULL, 0, 0, 2, "UFFDIO_REGISTER with high bits"},
	    {MV_SC_ioctl, 3, 0x5401, 0, 0, 0, "TCGETS makes no region"},
	    {MV_SC_madvise, 0x1000, 4096, 0x10000000aULL, 0, 2, "MADV_DONTFORK with high bits"},
	    {MV_SC_madvise, 0x1000, 4096, 4, 0, 0, "MADV_DONTNEED does not split"},
	    {MV_SC_process_madvise, 3, 0, 3, 10, 6, "process_madvise: 2 per range"},
	    {MV_SC_process_madvise, 3, 0, 1 << 20, 10, 2048, "process_madvise: at most 1024 ranges"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct mv_call c = {.sc = cases[i].sc, .abi = MV_ABI_X86_64,
				    .args = {cases[i].a0, cases[i].a1, cases[i].a2, cases[i].a3}};
		uint32_t got = limits_region_delta(&c);
		ok(got == cases[i].want, "region delta: %s (%u)", cases[i].what, got);
	}
}

int main(void)
{
	syscalls_init();
	test_bad();
	test_every_error();
	test_good();
	test_defaults();
	test_jpos();
	test_names();
	test_mprotect_covers_pkey();
	test_runtime_gaps();
	test_region_delta();
	return tap_done();
}
