/* Prometheus text expositions put together (promtext.h). */
#include "state/promtext.h"
#include "common/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void promtext_label(char **buf, size_t *len, const char *key, const char *value)
{
	size_t need = *len + strlen(key) + 2 * strlen(value) + 8;
	*buf = xrealloc(*buf, need);
	char *p = *buf + *len;
	if (*len)
		*p++ = ',';
	p += sprintf(p, "%s=\"", key);
	for (const char *v = value; *v; v++) {
		if (*v == '\\' || *v == '"')
			*p++ = '\\', *p++ = *v;
		else if (*v == '\n')
			*p++ = '\\', *p++ = 'n';
		else
			*p++ = *v;
	}
	*p++ = '"';
	*p = '\0';
	*len = (size_t)(p - *buf);
}

/* One family: its name, its # HELP and # TYPE lines, its samples (each
 * already relabelled), in an open_memstream. */
struct fam {
	char *name;
	char *header;
	bool has_help, has_type;
	char *samples;
	size_t samples_len;
	FILE *f;
};

struct fams {
	struct fam *v;
	size_t n, cap;
};

static struct fam *fam_get(struct fams *fs, const char *name, size_t len)
{
	for (size_t i = 0; i < fs->n; i++)
		if (strlen(fs->v[i].name) == len && !memcmp(fs->v[i].name, name, len))
			return &fs->v[i];
	if (fs->n == fs->cap)
		fs->v = xrealloc(fs->v, (fs->cap = fs->cap ? fs->cap * 2 : 32) * sizeof(*fs->v));
	struct fam *f = &fs->v[fs->n++];
	memset(f, 0, sizeof(*f));
	f->name = xmalloc(len + 1);
	memcpy(f->name, name, len);
	f->name[len] = '\0';
	f->f = open_memstream(&f->samples, &f->samples_len);
	return f;
}

/* The family a sample's metric name belongs to: the declared family
 * whose name is the metric's, or its stem before _total, _bucket, _sum,
 * _count (as the format groups them). */
static struct fam *fam_of_sample(struct fams *fs, const char *name, size_t len, struct fam *current)
{
	if (current) {
		size_t k = strlen(current->name);
		if (len >= k && !memcmp(name, current->name, k))
			return current;
	}
	return fam_get(fs, name, len);
}

/* A sample line with labels put first inside its braces. */
static void put_sample(FILE *f, const char *line, size_t len, const char *labels)
{
	size_t name = strcspn(line, "{ ");
	if (name > len)
		name = len;
	if (!labels || !*labels) {
		fwrite(line, 1, len, f);
	} else if (name < len && line[name] == '{') {
		fwrite(line, 1, name + 1, f);
		fputs(labels, f);
		if (line[name + 1] != '}')
			fputc(',', f);
		fwrite(line + name + 1, 1, len - name - 1, f);
	} else {
		fwrite(line, 1, name, f);
		fprintf(f, "{%s}", labels);
		fwrite(line + name, 1, len - name, f);
	}
	fputc('\n', f);
}

char *promtext_merge(const char *const *texts, const char *const *labels, size_t n)
{
	struct fams fs = {0};
	for (size_t t = 0; t < n; t++) {
		struct fam *cur = NULL;
		for (const char *p = texts[t]; p && *p;) {
			size_t len = strcspn(p, "\n");
			const char *line = p;
			p += len + (p[len] == '\n');
			if (len > 7 &&
			    (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7))) {
				const char *nm = line + 7;
				size_t nl = strcspn(nm, " \n");
				cur = fam_get(&fs, nm, nl);
				/* The first declaration is the family's. */
				bool *had = line[2] == 'H' ? &cur->has_help : &cur->has_type;
				if (!*had) {
					*had = true;
					size_t hl = cur->header ? strlen(cur->header) : 0;
					cur->header = xrealloc(cur->header, hl + len + 2);
					memcpy(cur->header + hl, line, len);
					cur->header[hl + len] = '\n';
					cur->header[hl + len + 1] = '\0';
				}
				continue;
			}
			if (len == 0 || line[0] == '#')
				continue;
			size_t nl = strcspn(line, "{ ");
			struct fam *f = fam_of_sample(&fs, line, nl < len ? nl : len, cur);
			put_sample(f->f, line, len, labels ? labels[t] : NULL);
		}
	}
	char *out = NULL;
	size_t out_len = 0;
	FILE *o = open_memstream(&out, &out_len);
	for (size_t i = 0; i < fs.n; i++) {
		struct fam *f = &fs.v[i];
		fclose(f->f);
		if (f->header)
			fputs(f->header, o);
		if (f->samples)
			fputs(f->samples, o);
		free(f->name);
		free(f->header);
		free(f->samples);
	}
	fclose(o);
	free(fs.v);
	return out;
}
