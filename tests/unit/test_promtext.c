/* state/promtext.c: labels added to expositions, and several merged with
 * each family declared once. */
#include "state/promtext.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_label(void)
{
	char *b = NULL;
	size_t n = 0;
	promtext_label(&b, &n, "container", "c1");
	promtext_label(&b, &n, "name", "a\"b\\c\nd");
	ok(!strcmp(b, "container=\"c1\",name=\"a\\\"b\\\\c\\nd\"") && n == strlen(b),
	   "labels joined by a comma, \\, \" and newline escaped");
	free(b);
}

static const char *const A = "# HELP m_total Calls.\n# TYPE m_total counter\n"
			     "m_total{syscall=\"mmap\"} 3\nm_total{syscall=\"brk\"} 1\n"
			     "# HELP g A gauge.\n# TYPE g gauge\ng 5\n"
			     "# HELP h Times.\n# TYPE h histogram\n"
			     "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
static const char *const B = "# HELP m_total Calls.\n# TYPE m_total counter\n"
			     "m_total{syscall=\"mmap\"} 7\n"
			     "# HELP g A gauge.\n# TYPE g gauge\ng 9\n"
			     "# HELP only_b Only here.\n# TYPE only_b gauge\nonly_b{} 1\n";

static void test_merge(void)
{
	const char *texts[] = {A, B};
	const char *labels[] = {"c=\"a\"", "c=\"b\",n=\"x\""};
	char *m = promtext_merge(texts, labels, 2);
	const char *want = "# HELP m_total Calls.\n# TYPE m_total counter\n"
			   "m_total{c=\"a\",syscall=\"mmap\"} 3\nm_total{c=\"a\",syscall=\"brk\"} 1\n"
			   "m_total{c=\"b\",n=\"x\",syscall=\"mmap\"} 7\n"
			   "# HELP g A gauge.\n# TYPE g gauge\ng{c=\"a\"} 5\ng{c=\"b\",n=\"x\"} 9\n"
			   "# HELP h Times.\n# TYPE h histogram\n"
			   "h_bucket{c=\"a\",le=\"1\"} 1\nh_bucket{c=\"a\",le=\"+Inf\"} 2\n"
			   "h_sum{c=\"a\"} 3\nh_count{c=\"a\"} 2\n"
			   "# HELP only_b Only here.\n# TYPE only_b gauge\nonly_b{c=\"b\",n=\"x\"} 1\n";
	ok(!strcmp(m, want), "each family declared once, its samples from both, labelled first");
	if (strcmp(m, want))
		fprintf(stderr, "# got:\n%s", m);
	free(m);
	const char *one[] = {A};
	m = promtext_merge(one, NULL, 1);
	ok(!strcmp(m, A), "one text, no labels: as it was");
	free(m);
	const char *junk[] = {"garbage line without value\n\n#comment\n"};
	m = promtext_merge(junk, NULL, 1);
	ok(m != NULL, "a line that is no sample does not break it");
	free(m);
	m = promtext_merge(NULL, NULL, 0);
	ok(m && !*m, "nothing: empty");
	free(m);
}

int main(void)
{
	test_label();
	test_merge();
	return tap_done();
}
