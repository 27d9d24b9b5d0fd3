/* Unit tests of the image format: CRC32C, the JSON writer, extent math,
 * the manifest (write, parse, validate), the pages header, base64 and
 * layout matching. */
#include "common/crc32c.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "state/image.h"
#include "tests/unit/tap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void test_crc32c(void)
{
	unsigned char buf[32];
	is_u64(crc32c("123456789", 9), 0xe3069283, "crc32c check value (RFC 3720)");
	memset(buf, 0, sizeof(buf));
	is_u64(crc32c(buf, 32), 0x8a9136aa, "32 zero bytes (RFC 3720 B.4)");
	memset(buf, 0xff, sizeof(buf));
	is_u64(crc32c(buf, 32), 0x62a8ab43, "32 0xff bytes (RFC 3720 B.4)");
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	is_u64(crc32c(buf, 32), 0x46dd794e, "32 incrementing bytes (RFC 3720 B.4)");
	is_u64(crc32c("", 0), 0, "empty input");

	/* Every length and alignment around the 3-lane block agrees with
	 * the table implementation, and updates chain. */
	size_t n = 3 * 4096 + 64;
	unsigned char *big = xmalloc(n);
	srand(7);
	for (size_t i = 0; i < n; i++)
		big[i] = (unsigned char)rand();
	int bad = 0, bad_chain = 0;
	for (size_t len = 0; len < n - 16; len += len < 64 ? 1 : 97) {
		for (size_t off = 0; off < 9; off += 4) {
			uint32_t fast = crc32c(big + off, len);
			crc32c_force_table(true);
			uint32_t slow = crc32c(big + off, len);
			crc32c_force_table(false);
			bad += fast != slow;
			size_t cut = len / 3;
			bad_chain += crc32c_update(crc32c(big + off, cut), big + off + cut, len - cut) != fast;
		}
	}
	is_u64(bad, 0, "%s agrees with the table at every length and alignment", crc32c_impl());
	is_u64(bad_chain, 0, "crc32c_update chains");
	uint32_t comb = crc32c(big, 4096);
	for (size_t k = 1; k < 3; k++)
		comb = crc32c_combine_page(comb, crc32c(big + k * 4096, 4096));
	is_u64(comb, crc32c(big, 3 * 4096), "three pages' checksums combine into theirs");
	is_u64(crc32c_combine_page(crc32c(big, 5), crc32c(big + 5, 4096)), crc32c(big, 4101),
	       "a page's checksum combines after any length");
	uint32_t before = crc32c(big, 4096);
	big[1234] ^= 0x10;
	ok(crc32c(big, 4096) != before, "one flipped bit changes the checksum");
	free(big);
}

static void test_jsonw(void)
{
	struct jw w;
	jw_init(&w, 1);
	jw_obj(&w);
	jw_kstr(&w, "plain", "a\"b\\c\n\x01");
	jw_kstr(&w, "utf8", "h\xc3\xa9llo");
	jw_kstr(&w, "bad", "x\xff\xc3y");
	jw_kstr(&w, "null", NULL);
	jw_ku64(&w, "big", UINT64_MAX >> 1);
	jw_ki64(&w, "neg", -42);
	jw_khex(&w, "hex", 0x7f0012340000ull);
	jw_key(&w, "arr");
	jw_arr(&w);
	jw_arr_end(&w);
	jw_key(&w, "nested");
	jw_arr(&w);
	jw_u64(&w, 1);
	jw_bool(&w, true);
	jw_null(&w);
	jw_f64(&w, 2.0);
	jw_arr_end(&w);
	jw_obj_end(&w);
	json_error_t e;
	json_t *r = json_loadb(w.buf, w.len, 0, &e);
	ok(r != NULL, "the writer's output loads: %s", r ? "yes" : e.text);
	ok(r && strcmp(json_string_value(json_object_get(r, "plain")), "a\"b\\c\n\x01") == 0,
	   "escapes round-trip");
	ok(r && strcmp(json_string_value(json_object_get(r, "utf8")), "h\xc3\xa9llo") == 0,
	   "valid UTF-8 kept as is");
	ok(r && strcmp(json_string_value(json_object_get(r, "bad")), "x\xc3\xbf\xc3\x83y") == 0,
	   "invalid bytes become Latin-1 characters");
	ok(r && json_is_null(json_object_get(r, "null")), "NULL string is null");
	ok(r && json_integer_value(json_object_get(r, "big")) == (json_int_t)(UINT64_MAX >> 1),
	   "large integer");
	ok(r && json_integer_value(json_object_get(r, "neg")) == -42, "negative integer");
	ok(r && strcmp(json_string_value(json_object_get(r, "hex")), "0x7f0012340000") == 0, "hex");
	ok(r && json_array_size(json_object_get(r, "nested")) == 4, "nested array");
	ok(r && json_real_value(json_array_get(json_object_get(r, "nested"), 3)) == 2.0,
	   "a whole double stays a real");
	json_decref(r);
	jw_free(&w);
	ok(jw_utf8_valid((const unsigned char *)"\xed\xa0\x80", 3) == 0, "surrogates are invalid");
	ok(jw_utf8_valid((const unsigned char *)"\xc0\x80", 2) == 0, "overlong NUL is invalid");
}

static void test_extents(void)
{
	struct img_extents x = {0};
	uint64_t off = IMG_HEADER_SIZE;
	/* 1 MiB before a 2 MiB boundary to 3 MiB after it: 1 + 2 + 1 MiB. */
	uint64_t base = 0x7f0000000000ull;
	size_t n = img_extents_add_run(&x, base + (1u << 20), base + (4u << 20) + (1u << 20), &off);
	is_u64(n, 3, "a run over two 2 MiB boundaries is three extents");
	is_u64(x.v[0].pages, 256, "first extent ends at the boundary");
	is_u64(x.v[1].pages, 512, "middle extent is one whole block");
	is_u64(x.v[1].addr, base + (2u << 20), "middle extent starts on the boundary");
	is_u64(x.v[2].off, IMG_HEADER_SIZE + (3u << 20), "file offsets are consecutive");
	is_u64(off, IMG_HEADER_SIZE + (4u << 20), "offset advanced by the run");
	n = img_extents_add_run(&x, base + (8u << 20), base + (8u << 20) + IMG_PAGE, &off);
	is_u64(n, 1, "a single page is one extent");
	ok(img_extents_find(&x, base + (3u << 20) + 5) == &x.v[1], "find inside an extent");
	ok(img_extents_find(&x, base + (6u << 20)) == NULL, "find in a gap");
	ok(img_extents_find(&x, base + (8u << 20) + IMG_PAGE - 1) == &x.v[3], "find last byte");
	ok(img_extents_find(&x, base + (8u << 20) + IMG_PAGE) == NULL, "find past the end");
	free(x.v);

	struct as_range have[] = {{10, 20}, {30, 40}, {50, 60}};
	struct as_range *out = NULL;
	size_t no = 0, cap = 0;
	img_ranges_subtract(have, 3, 0, 70, &out, &no, &cap);
	ok(no == 4 && out[0].start == 0 && out[0].end == 10 && out[1].start == 20 &&
		   out[1].end == 30 && out[3].start == 60 && out[3].end == 70,
	   "subtract: the gaps around and between");
	no = 0;
	img_ranges_subtract(have, 3, 12, 35, &out, &no, &cap);
	ok(no == 1 && out[0].start == 20 && out[0].end == 30, "subtract: a partly covered range");
	no = 0;
	img_ranges_subtract(have, 3, 30, 40, &out, &no, &cap);
	ok(no == 0, "subtract: a covered range leaves nothing");
	free(out);

	/* Two extents, [P0, P4) at offset 4096 and [P6, P8) at 32768;
	 * runs [P1, P2), [P3, P7), [P9, P10). */
	const uint64_t P = IMG_PAGE;
	struct img_extents two = {0}, in = {0};
	struct img_extent ev[] = {{0, 4096, 4, 0}, {6 * P, 32768, 2, 0}};
	two.v = ev;
	two.n = 2;
	struct as_range runs[] = {{P, 2 * P}, {3 * P, 7 * P}, {9 * P, 10 * P}};
	img_extents_within(&two, runs, 3, &in);
	ok(in.n == 3, "within: three pieces");
	ok(in.n == 3 && in.v[0].addr == P && in.v[0].pages == 1 && in.v[0].off == 4096 + P,
	   "within: a page inside the first extent, at its own offset");
	ok(in.n == 3 && in.v[1].addr == 3 * P && in.v[1].pages == 1 && in.v[1].off == 4096 + 3 * P,
	   "within: a run across the gap keeps only the extent's page");
	ok(in.n == 3 && in.v[2].addr == 6 * P && in.v[2].pages == 1 && in.v[2].off == 32768,
	   "within: the start of the second extent");
	free(in.v);
}

/* A small image: one process with a private region of two extents, a
 * shared region and its object, a file reference, one thread. */
static void build(struct img *im)
{
	img_init(im);
	img_new_id(im->id);
	snprintf(im->memvisor, sizeof(im->memvisor), "test");
	snprintf(im->kernel, sizeof(im->kernel), "Linux test");
	snprintf(im->arch, sizeof(im->arch), "x86_64");
	im->created_ns = 1700000000ull * 1000000000ull;
	struct img_proc *p = img_add_proc(im, 1234);
	p->ppid = 1;
	p->exe = xstrdup("/bin/test \xff");
	p->cmdline = xmalloc(8);
	memcpy(p->cmdline, "a\0bc\0", 5);
	p->cmdline_len = 5;
	struct img_thread *t = img_add_thread(p, 1234);
	uint64_t regs[27] = {0};
	regs[16] = 0x401000;
	regs[19] = 0x7ffc0000;
	img_thread_add_regset(t, "prstatus", 1, regs, sizeof(regs));
	img_thread_add_regset(t, "xstate", 0x202, "xyz", 3);
	uint64_t off = IMG_HEADER_SIZE;
	struct as_region src = {.start = 0x10000, .end = 0x20000, .prot = AS_PROT_READ | AS_PROT_WRITE,
				.kind = AS_ANON, .committed = 3 * IMG_PAGE};
	struct img_region *r = img_add_region(p, &src);
	r->content = IMG_PRIVATE;
	img_extents_add_run(&r->ext, 0x10000, 0x12000, &off);
	img_extents_add_run(&r->ext, 0x15000, 0x16000, &off);
	r->ext.v[0].crc = 0xdeadbeef;
	struct as_region sh = {.start = 0x30000, .end = 0x34000, .prot = AS_PROT_READ, .shared = true,
			       .kind = AS_SHMEM, .path = xstrdup("/memfd:x (deleted)"), .inode = 77,
			       .dev_minor = 1};
	r = img_add_region(p, &sh);
	r->content = IMG_SHARED;
	struct img_object *o = img_add_object(im, 77, 0, 1, "/memfd:x (deleted)");
	o->size = 0x4000;
	snprintf(o->source, sizeof(o->source), "map_files");
	img_extents_add_run(&o->ext, 0x1000, 0x2000, &off);
	r->object = 0;
	struct as_region f = {.start = 0x40000, .end = 0x41000, .prot = AS_PROT_READ, .shared = true,
			      .kind = AS_FILE, .path = xstrdup("/etc/hosts"), .inode = 5};
	img_add_region(p, &f)->content = IMG_FILE;
	im->sums_off = off;
	im->pages_size = off + img_sums_bytes(off);
	img_totals(im, &im->recorded);
}

static int parse_and_validate(const char *text, size_t len, char *err)
{
	struct img im;
	struct mv_err e = {0};
	int rc = img_manifest_parse(text, len, &im, &e);
	if (rc == 0)
		rc = img_validate(&im, &e);
	img_free(&im);
	snprintf(err, IMG_ERR_LEN, "%s", e.msg);
	return rc;
}

/* Replace the first occurrence of from in text (same length or not). */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	if (!at)
		return NULL;
	size_t pre = (size_t)(at - text);
	char *out = xmalloc(strlen(text) + strlen(to) + 1);
	memcpy(out, text, pre);
	strcpy(out + pre, to);
	strcat(out, at + strlen(from));
	return out;
}

static void expect_refused(const char *text, const char *from, const char *to, const char *what,
			   const char *needle)
{
	char err[IMG_ERR_LEN] = "";
	char *bad = edit(text, from, to);
	int rc = bad ? parse_and_validate(bad, strlen(bad), err) : 0;
	ok(bad && rc == -EINVAL && strstr(err, needle), "refused: %s (%s)", what, err);
	free(bad);
}

static void test_manifest(void)
{
	struct img im, back;
	build(&im);
	struct mv_err E = {0};
	const char *err = E.msg;
	ok(img_validate(&im, &E) == 0, "a built image validates: %s", err);
	size_t len;
	char *text = img_manifest_write(&im, &len);
	ok(text && len == strlen(text) && text[len - 1] == '\n', "manifest text ends in a newline");
	int rc = img_manifest_parse(text, len, &back, &E);
	ok(rc == 0, "manifest parses: %s", err);
	ok(rc == 0 && img_validate(&back, &E) == 0, "parsed manifest validates: %s", err);
	ok(strcmp(back.id, im.id) == 0 && back.created_ns == im.created_ns &&
		   back.pages_size == im.pages_size,
	   "top-level fields round-trip");
	ok(back.n_p == 1 && back.p[0].n_r == 3 && back.p[0].r[0].ext.n == 2 &&
		   back.p[0].r[0].ext.v[0].crc == 0xdeadbeef && back.p[0].r[0].ext.v[1].addr == 0x15000,
	   "regions and extents round-trip");
	ok(back.p[0].r[1].content == IMG_SHARED && back.p[0].r[1].object == 0 &&
		   back.n_o == 1 && back.o[0].ext.n == 1 && back.o[0].coverage == IMG_COVER_WHOLE,
	   "shared region and object round-trip");
	ok(back.p[0].n_t == 1 && back.p[0].t[0].n_regs == 2 && back.p[0].t[0].regs[1].len == 3 &&
		   memcmp(back.p[0].t[0].regs[1].data, "xyz", 3) == 0 &&
		   memcmp(back.p[0].t[0].regs[0].data, im.p[0].t[0].regs[0].data, 27 * 8) == 0,
	   "register sets round-trip byte for byte");
	ok(back.p[0].cmdline_len == 5 && memcmp(back.p[0].cmdline, "a\0bc\0", 5) == 0,
	   "cmdline round-trips");
	ok(strstr(text, "\"ip\":\"0x401000\"") && strstr(text, "\"sp\":\"0x7ffc0000\""),
	   "ip and sp are shown");
	img_free(&back);

	char *t2 = edit(text, "[86016,1,", "[86016,1,");
	ok(t2 != NULL, "the second extent is [address, pages, offset, crc]");
	free(t2);
	expect_refused(text, "\"version\":3", "\"version\":4", "another version", "version 4");
	expect_refused(text, "\"page_sums_offset\":20480", "\"page_sums_offset\":16384",
		       "page checksums that do not end the file", "page_sums_offset");
	{
		/* A version 1 manifest (no page checksums) is still read. */
		char *v1 = edit(text, "\"version\":3", "\"version\":1");
		char *v1b = v1 ? edit(v1, "\"page_sums_offset\":20480,", "") : NULL;
		char e1[IMG_ERR_LEN] = "";
		ok(v1b && parse_and_validate(v1b, strlen(v1b), e1) == 0, "a version 1 manifest is read: %s",
		   e1);
		free(v1);
		free(v1b);
	}
	expect_refused(text, "[65536,2,", "[65537,2,", "unaligned extent", "not page-aligned");
	expect_refused(text, "[65536,2,", "[61440,2,", "extent outside its region", "outside its region");
	expect_refused(text, "[65536,2,4096,", "[65536,2,0,", "extent over the header",
		       "outside the pages file");
	expect_refused(text, "[86016,1,12288,", "[86016,1,8192,", "extents overlapping in the file",
		       "overlap");
	expect_refused(text, "[86016,1,12288,", "[86016,1,409600,", "extent beyond the pages file",
		       "outside the pages file");
	expect_refused(text, "\"object\":0", "\"object\":5", "missing object", "object 5");
	expect_refused(text, "\"data_bytes\":16384", "\"data_bytes\":20480", "totals that disagree",
		       "totals.data_bytes");
	expect_refused(text, "\"content\":\"file\"", "\"content\":\"bogus\"", "unknown content",
		       "content");
	expect_refused(text, "\"end\":\"0x20000\"", "\"end\":\"0x38000\"", "overlapping regions",
		       "overlaps");
	expect_refused(text, "\"format\":\"memvisor-image\"", "\"format\":\"other\"", "other format",
		       "format");
	expect_refused(text, "\"checksum\":\"crc32c\"", "\"checksum\":\"md5\"", "unknown checksum",
		       "checksum");
	char err2[IMG_ERR_LEN];
	ok(parse_and_validate(text, len / 2, err2) == -EINVAL && strstr(err2, "not JSON"),
	   "a truncated manifest is refused: %s", err2);

	/* Version 3: extents of two processes may share bytes (a page
	 * shared copy-on-write, stored once); one process's may not, nor an
	 * object's, nor any before version 3. */
	{
		struct img_proc *q = img_add_proc(&im, 43);
		struct as_region src = {.start = 0x10000, .end = 0x20000, .kind = AS_ANON};
		struct img_region *r = img_add_region(q, &src);
		r->content = IMG_PRIVATE;
		uint64_t at = im.p[0].r[0].ext.v[0].off + IMG_PAGE;
		img_extents_add_run(&r->ext, 0x11000, 0x12000, &at);
		img_totals(&im, &im.recorded);
		ok(img_validate(&im, &E) == 0, "two processes' extents sharing a page: %s", err);
		im.version = 2;
		ok(img_validate(&im, &E) == -EINVAL &&
		       (strstr(err, "overlap") || strstr(err, "more bytes than")),
		   "version 2: two processes' extents sharing a page are refused: %s", err);
		im.version = IMG_VERSION;
		r->ext.v[0].off = im.o[0].ext.v[0].off;
		ok(img_validate(&im, &E) == -EINVAL && strstr(err, "overlap"),
		   "a process's extent sharing an object's bytes is refused: %s", err);
		r->ext.v[0].off = im.p[0].r[0].ext.v[1].off;
		img_extents_add_run(&r->ext, 0x15000, 0x16000, &at);
		r->ext.v[1].off = im.p[0].r[0].ext.v[1].off;
		img_totals(&im, &im.recorded);
		ok(img_validate(&im, &E) == -EINVAL && strstr(err, "overlap"),
		   "one process's two extents sharing a page are refused: %s", err);
	}

	/* A run crossing a 2 MiB boundary in one extent is refused. */
	im.p[0].r[0].start = 0x100000;
	im.p[0].r[0].end = 0x400000;
	im.p[0].r[0].ext.v[0].addr = 0x1ff000;
	ok(img_validate(&im, &E) == -EINVAL && strstr(err, "2 MiB"),
	   "an extent across a 2 MiB boundary is refused: %s", err);
	free(text);
	img_free(&im);
}

static void test_header(void)
{
	struct img_header h = {.version = IMG_VERSION, .pages_size = 1 << 20, .data_bytes = 12288,
			       .manifest_size = 999, .manifest_crc = 0x12345678,
			       .sums_off = 16384, .sums_crc = 0xabcdef01};
	img_new_id(h.id);
	unsigned char buf[IMG_HEADER_SIZE];
	img_header_encode(&h, buf);
	struct img_header g;
	struct mv_err E = {0};
	const char *err = E.msg;
	ok(img_header_decode(buf, &g, &E) == 0, "header decodes: %s", err);
	ok(strcmp(g.id, h.id) == 0 && g.pages_size == h.pages_size && g.data_bytes == h.data_bytes &&
		   g.manifest_size == 999 && g.manifest_crc == 0x12345678 && g.sums_off == 16384 &&
		   g.sums_crc == 0xabcdef01,
	   "header fields round-trip");
	buf[50] ^= 1;
	ok(img_header_decode(buf, &g, &E) == -EINVAL && strstr(err, "checksum"),
	   "a flipped header bit is caught: %s", err);
	buf[50] ^= 1;
	buf[93] ^= 4;
	ok(img_header_decode(buf, &g, &E) == -EINVAL && strstr(err, "checksum"),
	   "a flipped bit of the page checksums' checksum is caught: %s", err);
	buf[93] ^= 4;
	buf[4000] ^= 1;
	ok(img_header_decode(buf, &g, &E) == -EINVAL, "version 2: the whole header is checked");
	buf[4000] ^= 1;
	h.version = 1;
	img_header_encode(&h, buf);
	ok(img_header_decode(buf, &g, &E) == 0 && g.version == 1 && g.sums_off == 0,
	   "a version 1 header decodes, without page checksums: %s", err);
	buf[0] = 'X';
	ok(img_header_decode(buf, &g, &E) == -EINVAL && strstr(err, "magic"),
	   "a wrong magic is caught");
	char id2[33];
	img_new_id(id2);
	ok(strlen(id2) == 32 && strcmp(id2, h.id) != 0, "ids are 32 hex digits and differ");
}

static void test_b64(void)
{
	const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	int bad = 0;
	for (size_t i = 0; i < ARRAY_SIZE(in); i++) {
		char *e = img_b64_encode(in[i], strlen(in[i]));
		char d[16];
		long n = img_b64_decode(e, strlen(e), d, sizeof(d));
		bad += strcmp(e, want[i]) != 0 || n != (long)strlen(in[i]) || memcmp(d, in[i], (size_t)n);
		free(e);
	}
	is_u64(bad, 0, "base64 RFC 4648 test vectors round-trip");
	char d[16];
	ok(img_b64_decode("Zm9v!", 5, d, sizeof(d)) < 0, "bad length refused");
	ok(img_b64_decode("Zm=v", 4, d, sizeof(d)) < 0, "padding in the middle refused");
	ok(img_b64_decode("Zm9vYmFy", 8, d, 5) < 0, "output bound respected");
}

static void test_match(void)
{
	struct img im;
	build(&im);
	struct as_model live;
	as_model_init(&live);
	struct as_region a = {.start = 0x10000, .end = 0x20000, .prot = AS_PROT_READ | AS_PROT_WRITE,
			      .kind = AS_ANON};
	struct as_region s = {.start = 0x30000, .end = 0x34000, .prot = AS_PROT_READ, .shared = true,
			      .kind = AS_SHMEM, .inode = 77, .dev_minor = 1};
	as_model_push(&live, &a);
	as_model_push(&live, &s);
	struct mv_err E = {0};
	const char *err = E.msg;
	ok(img_match_layout(&im.p[0], &live, &E) == 0,
	   "the same layout matches (file references need not be mapped): %s", err);
	live.r[0].start = 0x8000; /* grown downwards, like a stack */
	ok(img_match_layout(&im.p[0], &live, &E) == 0, "a grown region still contains it");
	live.r[0].start = 0x10000;
	live.r[0].prot = AS_PROT_READ;
	ok(img_match_layout(&im.p[0], &live, &E) == -ESTALE && strstr(err, "changed"),
	   "a protection change is a mismatch: %s", err);
	live.r[0].prot = AS_PROT_READ | AS_PROT_WRITE;
	live.r[0].end = 0x18000;
	ok(img_match_layout(&im.p[0], &live, &E) == -ESTALE &&
		   strstr(err, "no longer mapped"),
	   "a shrunk region is a mismatch: %s", err);
	live.r[0].end = 0x20000;
	live.r[1].inode = 78;
	ok(img_match_layout(&im.p[0], &live, &E) == -ESTALE,
	   "another object is a mismatch");
	live.n = 0; /* as_model_free would free the paths we did not allocate */
	free(live.r);
	img_free(&im);
}

int main(void)
{
	test_crc32c();
	test_jsonw();
	test_extents();
	test_manifest();
	test_header();
	test_b64();
	test_match();
	return tap_done();
}
