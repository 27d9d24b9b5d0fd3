/* The control socket server: newline-delimited JSON requests from
 * `memvisor ctl` and scripts (docs/protocol.md). Main thread only. */
#ifndef MV_CTL_SERVER_H
#define MV_CTL_SERVER_H

#include "supervisor/supervise/mv.h"

/* A listening UNIX stream socket at path (non-blocking, close-on-exec),
 * never more open than 0600 (the umask at bind); a socket file left by a
 * listener that died is replaced first. The fd, or -errno: -EADDRINUSE
 * when something listens there, -EEXIST when path is not a socket. The
 * control server's and the agent's sockets. */
int ctl_listen_path(const char *path);
/* Create the socket and start accepting. 0, or -errno after printing why. */
int ctl_server_start(struct mv *mv);

/* Main thread, when a job may have ended: the requests waiting for it
 * (args.wait_ms) are answered. */
void ctl_server_jobs_ended(struct mv *mv);
/* Close every client and remove the socket file. */
void ctl_server_stop(struct mv *mv);
/* Free the stopped server (mv->socket_path goes with it). */
void ctl_server_free(struct mv *mv);

struct ctl_client;

/* The reply to one request line (without its newline), as the socket would
 * send it: malloc'd, newline-terminated; NULL only when the reply cannot be
 * encoded. The server answers every line through this; a request that
 * subscribes (events) is answered but subscribes nothing. Main thread. */
char *ctl_reply_line(struct mv *mv, const char *line, size_t len);

#endif
