/*
 * ctr_mem_static — a container's workload for the agent tests (static:
 * the container's rootfs holds nothing but busybox and these).
 *
 * Usage: ctr_mem_static hold MB DIR   map MB of anonymous memory, fill it
 *                                     with a pattern, print "filled", wait
 *                                     for DIR/go, check every byte, print
 *                                     "checksum X" and exit
 *        ctr_mem_static try MB        one mmap of MB; print "mmap: ok" or
 *                                     "mmap: errno N (NAME)"; exit with it
 *        ctr_mem_static ask SOCKET    send {"id":1,"cmd":"ps"} to a control
 *                                     socket and print the reply line (or
 *                                     "connect: errno N")
 *
 * Exit: 0 ok; the errno for try; 3 content mismatch; 100 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t pattern(size_t i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995;
}

static int hold(size_t mb, const char *dir)
{
	size_t n = mb << 20, words = n / 8;
	uint64_t *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		printf("mmap: errno %d\n", errno);
		return 2;
	}
	for (size_t i = 0; i < words; i++)
		m[i] = pattern(i);
	printf("filled %zu MiB\n", mb);
	fflush(stdout);
	char go[4096];
	snprintf(go, sizeof(go), "%s/go", dir);
	while (access(go, F_OK) != 0) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < words; i++) {
		if (m[i] != pattern(i)) {
			printf("mismatch at word %zu\n", i);
			return 3;
		}
		sum = sum * 31 + m[i];
	}
	printf("checksum %016" PRIx64 "\n", sum);
	return 0;
}

static int try(size_t mb)
{
	void *m = mmap(NULL, mb << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m != MAP_FAILED) {
		printf("mmap: ok\n");
		return 0;
	}
	int e = errno;
	printf("mmap: errno %d (%s)\n", e, e == ENOMEM ? "ENOMEM" : strerror(e));
	return e;
}

static int ask(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("connect: errno %d\n", errno);
		return 1;
	}
	static const char req[] = "{\"id\":1,\"cmd\":\"ps\"}\n";
	if (write(fd, req, sizeof(req) - 1) < 0)
		return 1;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	printf("reply: %s", buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "ask"))
		return ask(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "hold"))
		return hold(strtoul(argv[2], NULL, 10), argv[3]);
	if (argc >= 3 && !strcmp(argv[1], "try"))
		return try(strtoul(argv[2], NULL, 10));
	fprintf(stderr, "usage: ctr_mem_static hold MB DIR | try MB | ask SOCKET\n");
	return 100;
}
