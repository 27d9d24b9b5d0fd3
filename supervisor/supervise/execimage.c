/* The ELF program headers of a file about to be executed.
 *
 * What exec maps is decided by the kernel's loader from the program
 * headers (fs/binfmt_elf.c load_elf_binary): PT_GNU_STACK's PF_X gives an
 * executable stack (setup_arg_pages with EXSTACK_ENABLE_X, which
 * PR_SET_MDWE does not look at), and each PT_LOAD is mapped with its own
 * flags (elf_map), so an RWX segment is writable and executable memory
 * without any mmap the filter sees. Both must be refused before the exec,
 * the way SELinux's execstack/execmem checks do. */
#include "supervisor/supervise/execimage.h"
#include "common/util.h"
#include "supervisor/kernel/listener.h"
#include "supervisor/kernel/vm.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AT_FDCWD_	  (-100)
#define AT_EMPTY_PATH_	  0x1000
#define AT_NOFOLLOW_	  0x100
#define BINPRM_MAX_DEPTH_ 5 /* the file and 4 #! levels (BINPRM_MAX_RECURSION) */
#define MAX_PHDRS	  1024

struct ehdr_any {
	bool is64;
	uint64_t phoff;
	uint16_t phentsize, phnum;
};

static int read_ehdr(int fd, struct ehdr_any *h)
{
	Elf64_Ehdr e;
	ssize_t n = pread(fd, &e, sizeof(e), 0);
	if (n < (ssize_t)sizeof(Elf32_Ehdr) || memcmp(e.e_ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	h->is64 = e.e_ident[EI_CLASS] == ELFCLASS64;
	if (h->is64) {
		if (n < (ssize_t)sizeof(e))
			return -ENOEXEC;
		h->phoff = e.e_phoff;
		h->phentsize = e.e_phentsize;
		h->phnum = e.e_phnum;
		return h->phentsize == sizeof(Elf64_Phdr) ? 0 : -ENOEXEC;
	}
	Elf32_Ehdr e32;
	memcpy(&e32, &e, sizeof(e32));
	h->phoff = e32.e_phoff;
	h->phentsize = e32.e_phentsize;
	h->phnum = e32.e_phnum;
	return h->phentsize == sizeof(Elf32_Phdr) ? 0 : -ENOEXEC;
}

/* One program header, in 64-bit form. */
static int read_phdr(int fd, const struct ehdr_any *h, unsigned i, Elf64_Phdr *ph)
{
	off_t off = (off_t)(h->phoff + (uint64_t)i * h->phentsize);
	if (h->is64)
		return pread(fd, ph, sizeof(*ph), off) == (ssize_t)sizeof(*ph) ? 0 : -ENOEXEC;
	Elf32_Phdr p;
	if (pread(fd, &p, sizeof(p), off) != (ssize_t)sizeof(p))
		return -ENOEXEC;
	*ph = (Elf64_Phdr){.p_type = p.p_type,
			   .p_flags = p.p_flags,
			   .p_offset = p.p_offset,
			   .p_filesz = p.p_filesz};
	return 0;
}

/* Open path as the caller would: absolute in its root, relative to base
 * (its cwd or a directory fd), "" for base itself. Only a regular file is
 * opened for reading (the kernel execs nothing else, and opening a FIFO or
 * a device could block or have effects): anything else is -ENOENT. */
static int open_in(pid_t tid, const char *base, const char *path, bool nofollow)
{
	char full[PATH_MAX + 64];
	if (path[0] == '/')
		snprintf(full, sizeof(full), "/proc/%d/root%s", tid, path);
	else if (!path[0])
		snprintf(full, sizeof(full), "/proc/%d/%s", tid, base);
	else
		snprintf(full, sizeof(full), "/proc/%d/%s/%s", tid, base, path);
	_cleanup_close_ int o = open(full, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	struct stat st;
	if (o < 0)
		return -errno;
	if (fstat(o, &st) < 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", o);
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int inspect_fd(pid_t tid, int fd, int depth, bool interp, struct pol_exec_image *out);

/* The interpreter an ELF file names (PT_INTERP: interp), or a #! line
 * names (loaded as the executable itself, its stack included): both are
 * opened by the kernel in the caller's root and cwd (open_exec). */
static int inspect_path(pid_t tid, const char *path, int depth, bool interp,
			struct pol_exec_image *out)
{
	if (depth >= BINPRM_MAX_DEPTH_)
		return 0; /* the kernel gives up with ELOOP */
	int fd = open_in(tid, "cwd", path, false);
	if (fd < 0)
		return fd == -ENOENT || fd == -ENOTDIR ? 0 : fd; /* the exec fails */
	int rc = inspect_fd(tid, fd, depth, interp, out);
	close(fd);
	return rc;
}

static int inspect_script(pid_t tid, int fd, int depth, struct pol_exec_image *out)
{
	char line[256];
	ssize_t n = pread(fd, line, sizeof(line) - 1, 0);
	if (n < 2)
		return 0;
	line[n] = 0;
	/* fs/binfmt_script.c: the interpreter is the first word after #!. */
	char *s = line + 2;
	s += strspn(s, " \t");
	s[strcspn(s, " \t\n")] = 0;
	if (*s)
		out->in_interp = true;
	return *s ? inspect_path(tid, s, depth + 1, false, out) : 0;
}

static int inspect_fd(pid_t tid, int fd, int depth, bool interp, struct pol_exec_image *out)
{
	char magic[2];
	if (pread(fd, magic, 2, 0) == 2 && magic[0] == '#' && magic[1] == '!')
		return inspect_script(tid, fd, depth, out);
	struct ehdr_any h;
	if (read_ehdr(fd, &h) < 0)
		return 0; /* not ELF: the exec fails, or binfmt_misc (docs/policy.md) */
	bool has_stack = false;
	char ipath[PATH_MAX] = "";
	for (unsigned i = 0; i < h.phnum && i < MAX_PHDRS; i++) {
		Elf64_Phdr ph;
		if (read_phdr(fd, &h, i, &ph) < 0)
			return 0; /* the loader refuses a truncated file too */
		if (ph.p_type == PT_LOAD && (ph.p_flags & (PF_W | PF_X)) == (PF_W | PF_X)) {
			out->rwx_load = true;
			out->in_interp |= interp;
		}
		/* Only the executable's PT_GNU_STACK sets the stack
		 * (load_elf_binary reads it from the main binary alone). */
		if (ph.p_type == PT_GNU_STACK && !interp) {
			has_stack = true;
			out->exec_stack |= (ph.p_flags & PF_X) != 0;
		}
		if (ph.p_type == PT_INTERP && !interp && ph.p_filesz > 1 &&
		    ph.p_filesz < sizeof(ipath) &&
		    pread(fd, ipath, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz)
			ipath[ph.p_filesz - 1] = 0;
	}
	/* A 32-bit binary without PT_GNU_STACK gets an executable stack and
	 * READ_IMPLIES_EXEC (elf_read_implies_exec, EXSTACK_DEFAULT). */
	if (!interp && !has_stack && !h.is64)
		out->exec_stack = true;
	return ipath[0] ? inspect_path(tid, ipath, depth, true, out) : 0;
}

/* The file an execve/execveat names, opened as the kernel will open it. */
static int open_target(const struct mv_call *c, int listener, uint64_t id,
		       const struct vm_faulter *f)
{
	bool at = c->sc == MV_SC_execveat;
	char path[PATH_MAX];
	ssize_t n = vm_read_string(c->tid, c->args[at ? 1 : 0], path, sizeof(path), f);
	if (n < 0)
		return n == -EFAULT ? -ENOENT : (int)n;
	/* The read went to the notifying thread's memory only if it still
	 * waits in this notification (seccomp_unotify(2): pid reuse). */
	if (!listener_id_valid(listener, id))
		return -ESRCH;
	int dirfd = at ? (int)c->args[0] : AT_FDCWD_;
	int flags = at ? (int)c->args[4] : 0;
	char base[32];
	if (dirfd == AT_FDCWD_ || path[0] == '/')
		snprintf(base, sizeof(base), "cwd");
	else
		snprintf(base, sizeof(base), "fd/%d", dirfd);
	if (!path[0] && !(at && (flags & AT_EMPTY_PATH_)))
		return -ENOENT;
	return open_in(c->tid, base, path, (flags & AT_NOFOLLOW_) != 0);
}

int execimage_inspect(const struct mv_call *c, int listener, const struct vm_faulter *f,
		      struct pol_exec_image *out)
{
	memset(out, 0, sizeof(*out));
	int fd = open_target(c, listener, c->id, f);
	if (fd < 0)
		return fd == -ENOTDIR || fd == -ELOOP || fd == -EISDIR ? -ENOENT : fd;
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, out->path, sizeof(out->path) - 1);
	out->path[n > 0 ? n : 0] = 0;
	int rc = inspect_fd(c->tid, fd, 0, false, out);
	close(fd);
	return rc;
}
