/* Unit tests of common/: sizes, histogram, int map, syscall table, files. */
#include "common/hist.h"
#include "common/imap.h"
#include "common/syscalls.h"
#include "common/compat.h"
#include "common/util.h"
#include "tests/unit/tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void test_sizes(void)
{
	uint64_t v;
	ok(mv_parse_size("4096", &v) == 0 && v == 4096, "plain bytes");
	ok(mv_parse_size("64K", &v) == 0 && v == 65536, "K suffix");
	ok(mv_parse_size("512M", &v) == 0 && v == 512ull << 20, "M suffix");
	ok(mv_parse_size("2G", &v) == 0 && v == 2ull << 30, "G suffix");
	ok(mv_parse_size("2GiB", &v) == 0 && v == 2ull << 30, "GiB suffix");
	ok(mv_parse_size("1T", &v) == 0 && v == 1ull << 40, "T suffix");
	ok(mv_parse_size("", &v) == -EINVAL, "empty refused");
	ok(mv_parse_size("-1", &v) == -EINVAL, "negative refused");
	ok(mv_parse_size("12X", &v) == -EINVAL, "unknown suffix refused");
	ok(mv_parse_size("1.5G", &v) == -EINVAL, "fraction refused");
	ok(mv_parse_size("99999999999999999999", &v) == -ERANGE, "overflow refused");
	ok(mv_parse_size("20000000T", &v) == -ERANGE, "overflow by suffix refused");
	char buf[32];
	ok(strcmp(mv_human_size(1536, buf, sizeof(buf)), "1.5 KiB") == 0, "human 1.5 KiB");
	ok(strcmp(mv_human_size(12, buf, sizeof(buf)), "12 B") == 0, "human bytes");
	ok(strcmp(mv_shell_word("web-1", buf, sizeof(buf)), "web-1") == 0, "plain word as it is");
	ok(strcmp(mv_shell_word("/run/a b.sock", buf, sizeof(buf)), "'/run/a b.sock'") == 0,
	   "a space is quoted");
	ok(strcmp(mv_shell_word("it's", buf, sizeof(buf)), "'it'\\''s'") == 0,
	   "a quote closes, escapes and reopens");
	ok(strcmp(mv_shell_word("", buf, sizeof(buf)), "''") == 0, "empty word quoted");
	ok(strcmp(mv_shell_word("$x", buf, 4), "'$'") == 0, "cut short, still quoted");
}

static void test_hist(void)
{
	struct hist h;
	memset(&h, 0, sizeof(h));
	is_u64(hist_quantile(&h, 0.5), 0, "empty histogram quantile is 0");
	int bad = 0;
	for (uint64_t v = 0; v < (1u << 20); v += 7)
		bad += hist_bucket_low(hist_index(v)) > v;
	is_u64(bad, 0, "bucket low bound <= value");
	/* Every bucket's low bound maps back to itself. */
	bad = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		bad += hist_index(hist_bucket_low(i)) != i;
	is_u64(bad, 0, "bucket bounds round-trip");
	for (uint64_t i = 1; i <= 1000; i++)
		hist_add(&h, i * 1000);
	uint64_t p50 = hist_quantile(&h, 0.5), p99 = hist_quantile(&h, 0.99);
	ok(p50 >= 500000 * 15 / 16 && p50 <= 500000 * 17 / 16, "p50 within 1/16: %llu", (unsigned long long)p50);
	ok(p99 >= 990000 * 15 / 16 && p99 <= 990000 * 17 / 16, "p99 within 1/16: %llu", (unsigned long long)p99);
	is_u64(hist_quantile(&h, 1.0), 1000000, "p100 is the max");
	is_u64(h.count, 1000, "count");
	struct hist h2;
	memset(&h2, 0, sizeof(h2));
	hist_add(&h2, 5);
	hist_merge(&h2, &h);
	is_u64(h2.count, 1001, "merged count");
	is_u64(hist_quantile(&h2, 0.0001), 5, "merged min sample");
	hist_add(&h2, UINT64_MAX);
	is_u64(h2.max, UINT64_MAX, "huge sample kept as max");
}

/* Below a power of two the count is exact (metrics' buckets rely on it). */
static void test_hist_below(void)
{
	struct hist h;
	memset(&h, 0, sizeof(h));
	uint64_t samples[] = {0, 1, 15, 16, 1023, 1024, 1025, 1500, 4095, 4096, 1u << 30};
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
		hist_add(&h, samples[i]);
	int bad = 0;
	for (unsigned k = 0; k <= 40; k++) {
		uint64_t want = 0;
		for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
			want += samples[i] < (1ull << k);
		bad += hist_count_below(&h, 1ull << k) != want;
	}
	is_u64(bad, 0, "samples below each power of two counted exactly");
	is_u64(hist_count_below(&h, 0), 0, "nothing below 0");
	is_u64(hist_count_below(&h, 1100), 7, "inside a bucket: the bucket counts whole");
}

static void test_imap(void)
{
	struct imap m;
	imap_init(&m);
	int vals[5000];
	for (int i = 0; i < 5000; i++)
		imap_put(&m, i * 3, &vals[i]);
	int bad = 0;
	for (int i = 0; i < 5000; i++)
		bad += imap_get(&m, i * 3) != &vals[i];
	is_u64(bad, 0, "5000 entries found after growth");
	ok(imap_get(&m, 1) == NULL, "absent key");
	bad = 0;
	for (int i = 0; i < 5000; i += 2)
		bad += imap_del(&m, i * 3) != &vals[i];
	is_u64(bad, 0, "deletions return the stored values");
	bad = 0;
	for (int i = 0; i < 5000; i++)
		bad += imap_get(&m, i * 3) != (i % 2 ? &vals[i] : NULL);
	is_u64(bad, 0, "remaining entries intact after deletions");
	is_u64(m.len, 2500, "length");
	size_t n = 0;
	int k;
	void *v;
	for (size_t it = 0; imap_next(&m, &it, &k, &v);)
		n++;
	is_u64(n, 2500, "iteration visits every entry");
	imap_free(&m);
}

static void test_syscalls(void)
{
	ok(syscalls_init() == 0, "syscall table resolves");
	enum mv_abi abi;
	ok(syscalls_decode(AUDIT_ARCH_X86_64, 9, &abi) == MV_SC_mmap && abi == MV_ABI_X86_64, "x86_64 9 is mmap");
	ok(syscalls_decode(AUDIT_ARCH_I386, 192, &abi) == MV_SC_mmap2 && abi == MV_ABI_I386, "i386 192 is mmap2");
	ok(syscalls_decode(AUDIT_ARCH_I386, 90, &abi) == MV_SC_mmap, "i386 90 is (old) mmap");
	ok(syscalls_decode(AUDIT_ARCH_X86_64, 0x40000009, &abi) == MV_SC_mmap && abi == MV_ABI_X32, "x32 mmap");
	ok(syscalls_decode(AUDIT_ARCH_X86_64, 0, &abi) == MV_SC_UNKNOWN, "read is not ours");
	ok(syscalls_decode(0x1234, 9, &abi) == MV_SC_UNKNOWN, "unknown arch");
	ok(syscalls_decode(AUDIT_ARCH_X86_64, 100000, &abi) == MV_SC_UNKNOWN, "out of range number");
	ok(syscalls_nr(MV_SC_mmap2, MV_ABI_X86_64) == -1, "no mmap2 on x86_64");
	ok(syscalls_by_name("pkey_mprotect") == MV_SC_pkey_mprotect, "by name");
	ok(syscalls_by_name("read") == MV_SC_UNKNOWN, "by name: not ours");
	ok(strcmp(syscalls_arg_names(MV_SC_munmap), "addr,length") == 0, "arg names");
}

/* Files a user names: only regular files are opened, never waited on,
 * and read no further than asked. */
static void test_regular_files(void)
{
	char dir[] = "/tmp/mv-unit.XXXXXX";
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct mv_err err = {0};
	struct stat st;
	ok(mkfifoat(dfd, "fifo", 0600) == 0, "a FIFO made");
	ok(mv_open_regular_at(dfd, "fifo", 0, "F", &st, &err) == -EINVAL &&
	       strcmp(err.msg, "F is a FIFO, not a regular file") == 0,
	   "a FIFO without a writer is refused at once: %s", err.msg);
	ok(symlinkat("/dev/zero", dfd, "zero") == 0, "a symlink to /dev/zero made");
	ok(mv_open_regular_at(dfd, "zero", 0, "Z", NULL, &err) == -EINVAL &&
	       strstr(err.msg, "is a character device, not a regular file"),
	   "a device through a symlink is refused: %s", err.msg);
	_cleanup_close_ int w = openat(dfd, "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ok(w >= 0 && write(w, "0123456789", 10) == 10, "a file of 10 bytes made");
	ok(symlinkat("file", dfd, "link") == 0, "a symlink to it made");
	ok(mv_open_regular_at(dfd, "link", O_NOFOLLOW, "L", NULL, &err) == -EINVAL &&
	       strstr(err.msg, "is a symbolic link"),
	   "with O_NOFOLLOW a symlink is not followed");
	ok(mv_open_regular_at(dfd, "nothing", 0, "N", NULL, &err) == -ENOENT,
	   "a missing file is ENOENT: %s", err.msg);
	for (size_t max = 9; max <= 11; max++) {
		_cleanup_close_ int fd = mv_open_regular_at(dfd, "link", 0, "L", &st, &err);
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		int rc = fd < 0 ? fd : mv_read_fd_max(fd, max, &text, &len);
		if (max < 10)
			ok(rc == -EFBIG && st.st_size == 10, "10 bytes, at most %zu: EFBIG", max);
		else
			ok(rc == 0 && len == 10 && strcmp(text, "0123456789") == 0,
			   "10 bytes, at most %zu: read whole", max);
	}
	const char *names[] = {"fifo", "zero", "file", "link"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		unlinkat(dfd, names[i], 0);
	rmdir(dir);
}

int main(void)
{
	test_sizes();
	test_hist();
	test_hist_below();
	test_imap();
	test_syscalls();
	test_regular_files();
	return tap_done();
}
