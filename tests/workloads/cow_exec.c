/* cow_exec: does supervising an exec unshare the page its path is in?
 * For tests/bats/run.bats.
 *
 * The parent writes a path that does not exist into a page of its heap
 * and forks; the child, whose page is shared copy-on-write with the
 * parent's, execve()s that path (ENOENT), then reads its own pagemap:
 * "exclusive 0" when the page is still shared with the parent, "exclusive
 * 1" when something made it a copy of its own (a read pin by the
 * supervisor: process_vm_readv unshares what it pins). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 2;
	strcpy(page, "/nonexistent/cow_exec/path");
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		char *argv[] = {page, NULL}, *envp[] = {NULL};
		execve(page, argv, envp);
		if (errno != ENOENT)
			_exit(3);
		uint64_t e = 0;
		int fd = open("/proc/self/pagemap", O_RDONLY);
		if (fd < 0 || pread(fd, &e, 8, (off_t)((uintptr_t)page / 4096 * 8)) != 8)
			_exit(4);
		printf("exclusive %d\n", (int)(e >> 56 & 1));
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 5;
}
