/*
 * try_syscall — make exactly one memory syscall and report what it returned.
 *
 * Usage:
 *   try_syscall mmap LEN PROT FLAGS [FD [OFFSET [ADDR]]]
 *   try_syscall mprotect LEN PROT
 *   try_syscall munmap LEN
 *   try_syscall madvise LEN ADVICE
 *   try_syscall mremap OLDLEN NEWLEN FLAGS
 *   try_syscall brk DELTA
 *   try_syscall mlock LEN
 *   try_syscall pkey_mprotect LEN PROT PKEY
 *   try_syscall memfd_create NAME FLAGS
 *
 * The tested call is made raw with syscall(2), so glibc adds no checks or
 * extra calls. Setup happens first with ordinary calls that tests should not
 * be surprised by: mprotect, munmap, madvise, mlock and pkey_mprotect work on
 * a fresh mmap(LEN rounded up to pages, at least one page, RW, private
 * anonymous); mremap on a fresh mapping of OLDLEN (and, with FIXED, on a
 * PROT_NONE reservation of NEWLEN as the target); brk reads the current break
 * with brk(0) and then asks for break+DELTA (for a negative DELTA it first
 * grows the break by -DELTA, so the tested call shrinks it back).
 *
 * Arguments:
 *   LEN, OLDLEN, NEWLEN, OFFSET, DELTA  decimal or 0x hex, optional K/M/G
 *                         suffix (DELTA may be negative: -4K)
 *   PROT    READ|WRITE|EXEC|NONE|SEM|GROWSDOWN|GROWSUP or a number
 *   FLAGS   for mmap: SHARED|PRIVATE|SHARED_VALIDATE|ANONYMOUS (ANON)|FIXED|
 *           FIXED_NOREPLACE|NORESERVE|POPULATE|32BIT|GROWSDOWN|LOCKED|
 *           NONBLOCK|STACK|HUGETLB|SYNC|DENYWRITE|EXECUTABLE|UNINITIALIZED;
 *           for mremap: MAYMOVE|FIXED|DONTUNMAP (or 0);
 *           for memfd_create: CLOEXEC|ALLOW_SEALING|HUGETLB|NOEXEC_SEAL|EXEC.
 *           Names are case-insensitive, may carry their PROT_/MAP_/MREMAP_/
 *           MFD_ prefix, and may be mixed with numbers: "PRIVATE|ANON|0x40".
 *   ADVICE  NORMAL, RANDOM, SEQUENTIAL, WILLNEED, DONTNEED, FREE, REMOVE,
 *           DONTFORK, DOFORK, MERGEABLE, UNMERGEABLE, HUGEPAGE, NOHUGEPAGE,
 *           DONTDUMP, DODUMP, WIPEONFORK, KEEPONFORK, COLD, PAGEOUT,
 *           POPULATE_READ, POPULATE_WRITE, HWPOISON, SOFT_OFFLINE, or a number
 *   FD      (mmap) -1 (default), a number, "memfd" (a memfd sized to cover
 *           OFFSET+LEN), or a path containing '/' (opened O_RDWR, else
 *           O_RDONLY)
 *   ADDR    (mmap) a number, "reserved" (a PROT_NONE mapping made for the
 *           purpose — replaced by FIXED, EEXIST for FIXED_NOREPLACE) or
 *           "free" (a hole that was just unmapped). Default: "reserved" with
 *           FIXED, "free" with FIXED_NOREPLACE, else 0.
 *
 * Output (stdout, one line): "ok <result>" — hex 0x... for mmap, mremap and
 * brk, decimal otherwise — or "errno <N> <NAME>". For brk, a break that did
 * not move to the requested value counts as "errno 12 ENOMEM" (as in glibc).
 * Exit status: 0 on success, else the errno (capped at 255). Usage errors
 * exit 100 and setup failures 101, with a message on stderr (no errno a
 * memory syscall returns is 100 or 101; the stdout line tells anyway).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_UNINITIALIZED
#define MAP_UNINITIALIZED 0x4000000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect 329
#endif

#define EXIT_USAGE 100
#define EXIT_SETUP 101

struct name {
	const char *name;
	unsigned long value;
};

static const struct name prot_names[] = {
    {"NONE", PROT_NONE},       {"READ", PROT_READ}, {"WRITE", PROT_WRITE},
    {"EXEC", PROT_EXEC},       {"SEM", 0x8},	    {"GROWSDOWN", PROT_GROWSDOWN},
    {"GROWSUP", PROT_GROWSUP}, {NULL, 0},
};

static const struct name map_names[] = {
    {"SHARED", MAP_SHARED},
    {"PRIVATE", MAP_PRIVATE},
    {"SHARED_VALIDATE", MAP_SHARED_VALIDATE},
    {"ANONYMOUS", MAP_ANONYMOUS},
    {"ANON", MAP_ANONYMOUS},
    {"FIXED", MAP_FIXED},
    {"FIXED_NOREPLACE", MAP_FIXED_NOREPLACE},
    {"NORESERVE", MAP_NORESERVE},
    {"POPULATE", MAP_POPULATE},
    {"32BIT", MAP_32BIT},
    {"GROWSDOWN", MAP_GROWSDOWN},
    {"LOCKED", MAP_LOCKED},
    {"NONBLOCK", MAP_NONBLOCK},
    {"STACK", MAP_STACK},
    {"HUGETLB", MAP_HUGETLB},
    {"SYNC", MAP_SYNC},
    {"DENYWRITE", MAP_DENYWRITE},
    {"EXECUTABLE", MAP_EXECUTABLE},
    {"UNINITIALIZED", MAP_UNINITIALIZED},
    {NULL, 0},
};

static const struct name mremap_names[] = {
    {"MAYMOVE", MREMAP_MAYMOVE},
    {"FIXED", MREMAP_FIXED},
    {"DONTUNMAP", MREMAP_DONTUNMAP},
    {NULL, 0},
};

static const struct name mfd_names[] = {
    {"CLOEXEC", MFD_CLOEXEC}, {"ALLOW_SEALING", MFD_ALLOW_SEALING},
    {"HUGETLB", MFD_HUGETLB}, {"NOEXEC_SEAL", MFD_NOEXEC_SEAL},
    {"EXEC", MFD_EXEC},	      {NULL, 0},
};

static const struct name madv_names[] = {
    {"NORMAL", 0},	    {"RANDOM", 1},     {"SEQUENTIAL", 2},     {"WILLNEED", 3},
    {"DONTNEED", 4},	    {"FREE", 8},       {"REMOVE", 9},	      {"DONTFORK", 10},
    {"DOFORK", 11},	    {"MERGEABLE", 12}, {"UNMERGEABLE", 13},   {"HUGEPAGE", 14},
    {"NOHUGEPAGE", 15},	    {"DONTDUMP", 16},  {"DODUMP", 17},	      {"WIPEONFORK", 18},
    {"KEEPONFORK", 19},	    {"COLD", 20},      {"PAGEOUT", 21},	      {"POPULATE_READ", 22},
    {"POPULATE_WRITE", 23}, {"HWPOISON", 100}, {"SOFT_OFFLINE", 101}, {NULL, 0},
};

static size_t page_size;

static void usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "try_syscall: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nusage: try_syscall mmap LEN PROT FLAGS [FD [OFFSET [ADDR]]]\n"
			"       try_syscall mprotect LEN PROT\n"
			"       try_syscall munmap LEN\n"
			"       try_syscall madvise LEN ADVICE\n"
			"       try_syscall mremap OLDLEN NEWLEN FLAGS\n"
			"       try_syscall brk DELTA\n"
			"       try_syscall mlock LEN\n"
			"       try_syscall pkey_mprotect LEN PROT PKEY\n"
			"       try_syscall memfd_create NAME FLAGS\n");
	exit(EXIT_USAGE);
}

static void setup_fail(const char *what)
{
	fprintf(stderr, "try_syscall: setup %s failed: %s\n", what, strerror(errno));
	exit(EXIT_SETUP);
}

/* Signed number with optional K/M/G suffix. */
static long long parse_size(const char *s, int allow_negative)
{
	const char *p = s;
	int neg = 0;
	if (*p == '-') {
		if (!allow_negative)
			usage("bad length '%s' (negative)", s);
		neg = 1;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 0);
	if (errno || end == p || *p == '-' || *p == '+')
		usage("bad length '%s'", s);
	unsigned shift = 0;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		usage("bad length '%s'", s);
	}
	if (shift && end[1] != '\0')
		usage("bad length '%s'", s);
	if (v > (unsigned long long)INT64_MAX >> shift)
		usage("length '%s' too large", s);
	long long r = (long long)(v << shift);
	return neg ? -r : r;
}

static size_t parse_len(const char *s)
{
	return (size_t)parse_size(s, 0);
}

static int name_eq(const char *tok, size_t len, const char *name)
{
	return strlen(name) == len && strncasecmp(tok, name, len) == 0;
}

/* "A|B|0x10": names from the table (optional prefix) or numbers, OR'ed. */
static unsigned long parse_flags(const char *s, const struct name *table, const char *prefix,
				 const char *what)
{
	unsigned long v = 0;
	const char *p = s;
	size_t plen = strlen(prefix);

	if (*s == '\0')
		usage("empty %s", what);
	while (*p) {
		size_t len = strcspn(p, "|,");
		const char *tok = p;
		if (len == 0)
			usage("bad %s '%s'", s);
		if (len > plen && strncasecmp(tok, prefix, plen) == 0) {
			tok += plen;
			len -= plen;
		}
		int found = 0;
		for (const struct name *n = table; n->name; n++) {
			if (name_eq(tok, len, n->name)) {
				v |= n->value;
				found = 1;
				break;
			}
		}
		if (!found) {
			char buf[64];
			char *end;
			if (len >= sizeof(buf))
				usage("bad flag in '%s'", s);
			memcpy(buf, tok, len);
			buf[len] = '\0';
			errno = 0;
			unsigned long n = strtoul(buf, &end, 0);
			if (errno || *end || end == buf || buf[0] == '-')
				usage("unknown flag in '%s'", s);
			v |= n;
		}
		p += len;
		if (*p)
			p++;
	}
	return v;
}

static long parse_int(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || end == s)
		usage(what, s);
	return v;
}

static size_t round_pages(size_t len)
{
	if (len == 0)
		return page_size;
	if (len > SIZE_MAX - page_size)
		return len;
	return (len + page_size - 1) & ~(page_size - 1);
}

static void *setup_map(size_t len, int prot)
{
	void *p = mmap(NULL, round_pages(len), prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		setup_fail("mmap");
	return p;
}

/* Report the raw result of the tested call and exit. */
static int report(long r, int err, int hex)
{
	if (r == -1 && err) {
		const char *name = strerrorname_np(err);
		printf("errno %d %s\n", err, name ? name : "?");
		fflush(stdout);
		return err > 255 ? 255 : err;
	}
	if (hex)
		printf("ok 0x%lx\n", (unsigned long)r);
	else
		printf("ok %ld\n", r);
	fflush(stdout);
	return 0;
}

static void need(int argc, int min, int max, const char *call)
{
	if (argc < min || argc > max)
		usage("wrong number of arguments for %s", call);
}

static int do_mmap(int argc, char **argv)
{
	need(argc, 5, 8, "mmap");
	size_t len = parse_len(argv[2]);
	unsigned long prot = parse_flags(argv[3], prot_names, "PROT_", "PROT");
	unsigned long flags = parse_flags(argv[4], map_names, "MAP_", "FLAGS");
	long long off = argc > 6 ? parse_size(argv[6], 0) : 0;
	int fd = -1;
	void *addr = NULL;

	if (argc > 5) {
		const char *f = argv[5];
		if (strcmp(f, "memfd") == 0) {
			fd = (int)syscall(SYS_memfd_create, "try_syscall", 0);
			if (fd < 0)
				setup_fail("memfd_create");
			if (ftruncate(fd, (off_t)round_pages((size_t)off + len)) != 0)
				setup_fail("ftruncate(memfd)");
		} else if (strchr(f, '/')) {
			fd = open(f, O_RDWR);
			if (fd < 0)
				fd = open(f, O_RDONLY);
			if (fd < 0)
				setup_fail("open");
		} else {
			fd = (int)parse_int(f, "bad FD '%s'");
		}
	}

	const char *a = argc > 7 ? argv[7] : NULL;
	if (!a && (flags & MAP_FIXED))
		a = "reserved";
	else if (!a && (flags & MAP_FIXED_NOREPLACE))
		a = "free";
	if (a && (strcmp(a, "reserved") == 0 || strcmp(a, "free") == 0)) {
		size_t rlen = round_pages(len);
		addr =
		    mmap(NULL, rlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (addr == MAP_FAILED)
			setup_fail("mmap(reserve)");
		if (strcmp(a, "free") == 0 && munmap(addr, rlen) != 0)
			setup_fail("munmap(reserve)");
	} else if (a) {
		addr = (void *)(uintptr_t)parse_size(a, 0);
	}

	errno = 0;
	long r = syscall(SYS_mmap, addr, len, prot, flags, fd, (long)off);
	return report(r, errno, 1);
}

static int do_mprotect(int argc, char **argv)
{
	need(argc, 4, 4, "mprotect");
	size_t len = parse_len(argv[2]);
	unsigned long prot = parse_flags(argv[3], prot_names, "PROT_", "PROT");
	void *p = setup_map(len, PROT_READ | PROT_WRITE);
	errno = 0;
	long r = syscall(SYS_mprotect, p, len, prot);
	return report(r, errno, 0);
}

static int do_munmap(int argc, char **argv)
{
	need(argc, 3, 3, "munmap");
	size_t len = parse_len(argv[2]);
	void *p = setup_map(len, PROT_READ | PROT_WRITE);
	errno = 0;
	long r = syscall(SYS_munmap, p, len);
	return report(r, errno, 0);
}

static int do_madvise(int argc, char **argv)
{
	need(argc, 4, 4, "madvise");
	size_t len = parse_len(argv[2]);
	long advice = -1;
	for (const struct name *n = madv_names; n->name; n++) {
		const char *s = argv[3];
		if (strncasecmp(s, "MADV_", 5) == 0)
			s += 5;
		if (strcasecmp(s, n->name) == 0)
			advice = (long)n->value;
	}
	if (advice < 0)
		advice = parse_int(argv[3], "bad ADVICE '%s'");
	void *p = setup_map(len, PROT_READ | PROT_WRITE);
	errno = 0;
	long r = syscall(SYS_madvise, p, len, advice);
	return report(r, errno, 0);
}

static int do_mremap(int argc, char **argv)
{
	need(argc, 5, 5, "mremap");
	size_t oldlen = parse_len(argv[2]);
	size_t newlen = parse_len(argv[3]);
	unsigned long flags = parse_flags(argv[4], mremap_names, "MREMAP_", "FLAGS");
	void *target = NULL;
	void *p = setup_map(oldlen, PROT_READ | PROT_WRITE);
	if (flags & MREMAP_FIXED) {
		target = mmap(NULL, round_pages(newlen), PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (target == MAP_FAILED)
			setup_fail("mmap(target reserve)");
	}
	errno = 0;
	long r = syscall(SYS_mremap, p, oldlen, newlen, flags, target);
	return report(r, errno, 1);
}

static int do_brk(int argc, char **argv)
{
	need(argc, 3, 3, "brk");
	long long delta = parse_size(argv[2], 1);
	errno = 0;
	long cur = syscall(SYS_brk, 0);
	if (cur == -1 && errno)
		setup_fail("brk(0)");
	if (delta < 0) {
		/* Grow first, so the tested call can shrink (the kernel never
		 * moves the break below where it started). */
		errno = 0;
		long g = syscall(SYS_brk, (unsigned long)cur - (unsigned long)delta);
		if ((g == -1 && errno) ||
		    (unsigned long)g != (unsigned long)cur - (unsigned long)delta)
			setup_fail("brk(grow)");
		cur = g;
	}
	unsigned long want = (unsigned long)cur + (unsigned long)delta;
	errno = 0;
	long r = syscall(SYS_brk, want);
	int err = errno;
	if (!(r == -1 && err) && (unsigned long)r != want) {
		fprintf(stderr, "try_syscall: brk(0x%lx) left the break at 0x%lx\n", want,
			(unsigned long)r);
		r = -1;
		err = ENOMEM;
	}
	return report(r, err, 1);
}

static int do_mlock(int argc, char **argv)
{
	need(argc, 3, 3, "mlock");
	size_t len = parse_len(argv[2]);
	void *p = setup_map(len, PROT_READ | PROT_WRITE);
	errno = 0;
	long r = syscall(SYS_mlock, p, len);
	return report(r, errno, 0);
}

static int do_pkey_mprotect(int argc, char **argv)
{
	need(argc, 5, 5, "pkey_mprotect");
	size_t len = parse_len(argv[2]);
	unsigned long prot = parse_flags(argv[3], prot_names, "PROT_", "PROT");
	long pkey = parse_int(argv[4], "bad PKEY '%s'");
	void *p = setup_map(len, PROT_READ | PROT_WRITE);
	errno = 0;
	long r = syscall(SYS_pkey_mprotect, p, len, prot, pkey);
	return report(r, errno, 0);
}

static int do_memfd_create(int argc, char **argv)
{
	need(argc, 4, 4, "memfd_create");
	unsigned long flags = parse_flags(argv[3], mfd_names, "MFD_", "FLAGS");
	errno = 0;
	long r = syscall(SYS_memfd_create, argv[2], flags);
	return report(r, errno, 0);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} calls[] = {
	    {"mmap", do_mmap},
	    {"mprotect", do_mprotect},
	    {"munmap", do_munmap},
	    {"madvise", do_madvise},
	    {"mremap", do_mremap},
	    {"brk", do_brk},
	    {"mlock", do_mlock},
	    {"pkey_mprotect", do_pkey_mprotect},
	    {"memfd_create", do_memfd_create},
	};

	page_size = (size_t)sysconf(_SC_PAGESIZE);
	if (argc < 2)
		usage("%s", "missing syscall name");
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (strcmp(argv[1], calls[i].name) == 0)
			return calls[i].fn(argc, argv);
	usage("unknown syscall '%s'", argv[1]);
	return EXIT_USAGE;
}
