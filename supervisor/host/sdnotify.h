/* The service manager's readiness protocol (sd_notify(3)), without
 * libsystemd: a datagram to $NOTIFY_SOCKET. memvisor agent under a
 * systemd unit of Type=notify says when it listens (READY=1), when SIGHUP
 * reads its policy again (RELOADING=1, then READY=1), and when it stops
 * (STOPPING=1). Without $NOTIFY_SOCKET every call does nothing. */
#ifndef MV_SDNOTIFY_H
#define MV_SDNOTIFY_H

/* Take $NOTIFY_SOCKET and remove it from the environment, so that no
 * process started later (the keeper, a container's supervisor thread's
 * children) speaks for this one. */
void sdnotify_init(void);

/* Send MSG ("READY=1\nSTATUS=..."); a message that cannot be sent is
 * logged, never fatal. */
void sdnotify(const char *msg);

#endif
