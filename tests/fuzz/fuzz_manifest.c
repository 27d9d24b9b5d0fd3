/* libFuzzer harness: an image manifest through the parser and the
 * consistency check that `memvisor image verify/info` and reload run
 * before using an image (img_manifest_parse, img_validate), then a valid
 * one written back and parsed again, which must succeed. */
#include "state/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_roundtrip(const struct img *im)
{
	size_t len;
	char *text = img_manifest_write(im, &len);
	struct img again;
	struct mv_err E = {0};
	const char *err = E.msg;
	img_init(&again);
	if (img_manifest_parse(text, len, &again, &E) < 0) {
		fprintf(stderr, "written manifest refused: %s\n", err);
		abort();
	}
	img_free(&again);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img im;
	struct mv_err E = {0};
	const char *err = E.msg;
	img_init(&im);
	if (img_manifest_parse((const char *)data, size, &im, &E) == 0 &&
	    img_validate(&im, &E) == 0) {
		struct img_totals t;
		img_totals(&im, &t);
		check_roundtrip(&im);
	} else if (getenv("FUZZ_DEBUG")) {
		fprintf(stderr, "refused: %s\n", err); /* to check that seeds are valid */
	}
	img_free(&im);
	if (size >= IMG_HEADER_SIZE) {
		struct img_header h;
		img_header_decode(data, &h, &E);
	}
	return 0;
}
