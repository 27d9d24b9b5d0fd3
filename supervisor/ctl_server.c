#include "supervisor/ctl_server.h"

int ctl_server_start(struct mv *mv)
{
	return 0;
}

void ctl_server_stop(struct mv *mv)
{
}

void ctl_client_event(struct ctl_client *c, const char *line)
{
}

void ctl_client_dropped(struct ctl_client *c, uint64_t n)
{
}
