#include "state/ocistate.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

int ocistate_id_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > OCI_ID_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '+' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

/* A pid member: an integer from 1 to the kernel's PID_MAX_LIMIT. */
/* A process id; 0 where zero_ok (crun exec says 0: not known). */
static int get_pid(json_t *o, const char *key, bool zero_ok, pid_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < (zero_ok ? 0 : 1) ||
	    json_integer_value(v) > 4 * 1024 * 1024)
		return -1;
	*out = (pid_t)json_integer_value(v);
	return 0;
}

/* metadata: words separated by spaces, commas or semicolons. The value
 * of the last word "KEY=VALUE" into out (cap bytes): 1, 0 when there is
 * none, -1 when it does not fit. Anything else is kept, never
 * interpreted. */
static int metadata_word(const char *md, const char *key, char *out, size_t cap)
{
	size_t k = strlen(key);
	int found = 0;
	const char *p = md;
	while (*p) {
		size_t n = strcspn(p, " ,;");
		if (n > k && p[k] == '=' && !strncmp(p, key, k)) {
			found = n - k - 1 < cap ? 1 : -1;
			if (found > 0) {
				memcpy(out, p + k + 1, n - k - 1);
				out[n - k - 1] = '\0';
			}
		}
		p += n;
		p += strspn(p, " ,;");
	}
	return found;
}

/* The word "name=NAME" names the container for ctl (a bad one is
 * ignored: it only names). */
static void metadata_name(const char *md, char *name, size_t cap)
{
	if (metadata_word(md, "name", name, cap) <= 0 || !ocistate_id_ok(name) ||
	    strlen(name) > OCI_NAME_MAX)
		name[0] = '\0';
}

/* The policy the container asks for: state.annotations' "memvisor.policy",
 * or the metadata's word "memvisor.policy=NAME"; both must agree. A name
 * that is not one the agent takes is refused, never ignored: the
 * container would run under another policy than it asked for. */
static int parse_policy(json_t *root, struct oci_msg *m, struct mv_err *err)
{
	char from_md[OCI_NAME_MAX + 2] = "";
	const char *from_ann = NULL;
	json_t *ann = json_object_get(json_object_get(root, "state"), "annotations");
	json_t *v = json_is_object(ann) ? json_object_get(ann, OCI_POLICY_KEY) : NULL;
	if (v && !json_is_string(v))
		return mv_err_set(err, -EINVAL, NULL, "state.annotations.%s: expected a string",
				  OCI_POLICY_KEY);
	if (v)
		from_ann = json_string_value(v);
	int md =
	    m->metadata ? metadata_word(m->metadata, OCI_POLICY_KEY, from_md, sizeof(from_md)) : 0;
	const char *want = from_ann ? from_ann : md != 0 ? from_md : NULL;
	if (!want)
		return 0;
	if (md < 0 || strlen(want) > OCI_NAME_MAX || !ocistate_id_ok(want))
		return mv_err_set(err, -EINVAL, NULL,
				  "%s: expected a policy name (1 to %d of A-Z a-z 0-9 _ + . -)",
				  OCI_POLICY_KEY, OCI_NAME_MAX);
	if (from_ann && md > 0 && strcmp(from_ann, from_md) != 0)
		return mv_err_set(err, -EINVAL, NULL,
				  "the annotation asks for policy %s and the metadata for %s",
				  from_ann, from_md);
	snprintf(m->policy, sizeof(m->policy), "%s", want);
	return 0;
}

static int parse_fds(json_t *fds, struct oci_msg *m, struct mv_err *err)
{
	size_t i;
	json_t *v;
	if (!json_is_array(fds) || json_array_size(fds) == 0 || json_array_size(fds) > 64)
		return mv_err_set(err, -EINVAL, NULL, "fds: expected an array of 1 to 64 names");
	m->n_fds = json_array_size(fds);
	m->seccomp_fd = -1;
	json_array_foreach(fds, i, v)
	{
		if (!json_is_string(v))
			return mv_err_set(err, -EINVAL, NULL, "fds[%zu]: expected a string", i);
		if (!strcmp(json_string_value(v), "seccompFd") && m->seccomp_fd < 0)
			m->seccomp_fd = (int)i;
	}
	if (m->seccomp_fd < 0)
		return mv_err_set(err, -EINVAL, NULL, "fds: no \"seccompFd\"");
	return 0;
}

static int parse_state(json_t *st, struct oci_msg *m, struct mv_err *err)
{
	if (!json_is_object(st))
		return mv_err_set(err, -EINVAL, NULL, "state: expected an object");
	json_t *id = json_object_get(st, "id");
	if (!json_is_string(id) || !ocistate_id_ok(json_string_value(id)))
		return mv_err_set(err, -EINVAL, NULL,
				  "state.id: expected a container id (1 to %d of A-Z a-z 0-9 "
				  "_ + . -)",
				  OCI_ID_MAX);
	snprintf(m->id, sizeof(m->id), "%s", json_string_value(id));
	if (get_pid(st, "pid", true, &m->pid) < 0)
		return mv_err_set(err, -EINVAL, NULL, "state.pid: expected a process id");
	json_t *status = json_object_get(st, "status");
	if (json_is_string(status))
		snprintf(m->status, sizeof(m->status), "%s", json_string_value(status));
	json_t *bundle = json_object_get(st, "bundle");
	if (json_is_string(bundle) && json_string_length(bundle) < 4096)
		m->bundle = xstrdup(json_string_value(bundle));
	return 0;
}

int ocistate_parse(const char *buf, size_t len, struct oci_msg *out, struct mv_err *err)
{
	memset(out, 0, sizeof(*out));
	out->seccomp_fd = -1;
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return mv_err_set(err, -EINVAL, NULL, "not JSON: %s (column %d)", jerr.text,
				  jerr.column);
	int rc = 0;
	pid_t pid;
	if (!json_is_object(root))
		rc = mv_err_set(err, -EINVAL, NULL, "expected a JSON object");
	if (rc == 0)
		rc = parse_fds(json_object_get(root, "fds"), out, err);
	if (rc == 0)
		rc = parse_state(json_object_get(root, "state"), out, err);
	/* The process the fds came from: the container's init, or a process
	 * `runc exec` starts in it (then the agent adopts it into the
	 * container's supervision). Absent: the init. crun exec (1.8) says
	 * 0 here and in state.pid: a process not named. */
	if (rc == 0) {
		json_t *pv = json_object_get(root, "pid");
		if (!pv)
			out->proc_pid = out->pid;
		else if (get_pid(root, "pid", true, &pid) == 0)
			out->proc_pid = pid;
		else
			rc = mv_err_set(err, -EINVAL, NULL, "pid: expected a process id");
	}
	json_t *md = rc == 0 ? json_object_get(root, "metadata") : NULL;
	if (json_is_string(md) && json_string_length(md) <= 4096) {
		out->metadata = xstrdup(json_string_value(md));
		metadata_name(out->metadata, out->name, sizeof(out->name));
	}
	if (rc == 0)
		rc = parse_policy(root, out, err);
	json_decref(root);
	if (rc < 0)
		ocistate_free(out);
	return rc;
}

void ocistate_free(struct oci_msg *m)
{
	free(m->bundle);
	free(m->metadata);
	m->bundle = m->metadata = NULL;
}
