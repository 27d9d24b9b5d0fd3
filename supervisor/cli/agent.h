/* memvisor agent and memvisor oci-profile (docs/agent.md), and how ctl
 * shows the agent's `containers`. */
#ifndef MV_CLI_AGENT_H
#define MV_CLI_AGENT_H

#include "supervisor/cli/ctl_show.h"

#include <jansson.h>

int agent_main(int argc, char **argv);
int oci_profile_main(int argc, char **argv);
void ctl_show_containers(json_t *result, const struct ctl_show_opts *o);

#endif
