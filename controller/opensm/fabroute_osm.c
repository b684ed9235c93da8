/*
 * fabroute_osm: an OpenSM 3.3.x event plugin that registers the routing engine "fabroute".
 *
 * The engine is OpenSM's own "file" engine (osm_ucast_file_setup, exported by the opensm
 * binary: LFTs from the -U file) plus two hooks OpenSM's QoS manager and SA call on every
 * routing engine:
 *   update_sl2vl(port, in, out, table)  -> the VLs of our sl2vl.dump for (node, in, out)
 *   path_sl(hint, slid, dlid)           -> the SL of the first matching path-sl.txt rule,
 *                                          else of its SL matrix (port groups, a row of SLs
 *                                          per source group), else the hint
 * OpenSM then programs SL2VL itself (SubnSet SLtoVLMappingTable per (in, out) port pair;
 * osm_qos_setup, needs "qos TRUE") and answers PathRecord queries with our SLs.
 *
 * Loaded with, in the opensm config file (-F):
 *   event_plugin_name     fabroute_osm          (dlopen("libfabroute_osm.so"), LD_LIBRARY_PATH)
 *   event_plugin_options  <dir>                 (reads <dir>/sl2vl.dump, <dir>/path-sl.txt)
 *   routing_engine        fabroute,no_fallback
 *   qos                   TRUE
 *
 * Log lines (grep "fabroute_osm:"): "ready" with the counts after loading, "ERROR" on a
 * file it cannot use (the plugin then does not register the engine), "stats" at SUBNET UP.
 *
 * Live updates: every routing pass (each heavy sweep, e.g. after kill -HUP) first stats both
 * files; when either was replaced (inode, size or mtime differ) it reloads them ("reloaded"
 * with the counts; on an error it logs "ERROR reload" and keeps the tables it had).  OpenSM's
 * file engine re-reads the -U file on every pass by itself.
 *
 * Part of fabroute (controller/opensm/); built by emulation/ibsim/apply.py at first use:
 *   gcc -O2 -shared -fPIC -I/usr/include/infiniband -o libfabroute_osm.so fabroute_osm.c
 * Unresolved osm_* symbols bind to the opensm executable / libopensm at dlopen time.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* first: it defines ENABLE_OSM_PERF_MGR etc., which change osm_opensm_t's layout */
#include <opensm/osm_config.h>
#include <iba/ib_types.h>
#include <complib/cl_byteswap.h>
#include <opensm/osm_version.h>
#include <opensm/osm_opensm.h>
#include <opensm/osm_event_plugin.h>
#include <opensm/osm_log.h>
#include <opensm/osm_node.h>
#include <opensm/osm_port.h>
#include <opensm/osm_subnet.h>

#define TAG "fabroute_osm: "
#define WILD UINT64_MAX          /* '*' in a GUID column (no real GUID is all ones) */
#define ANY_OFF (-1)             /* '*' in the offset column */

/* the file engine's setup; exported by /usr/sbin/opensm, declared in no installed header */
extern int osm_ucast_file_setup(struct osm_routing_engine *r, osm_opensm_t *osm);

/* ---- SL2VL tables: per node (switch node GUID or CA port GUID) a dense (in, out) array ---- */
struct node_tbl {
	uint64_t guid;
	unsigned maxp;            /* ports 0..maxp */
	uint8_t *raw;             /* (maxp+1)^2 * 8 bytes: ib_slvl_table_t raw_vl_by_sl */
	uint8_t *have;            /* (maxp+1)^2 flags */
};

struct row { unsigned in, out; uint8_t raw[8]; };

/* ---- path SL rules ---- */
struct rule { uint64_t src, dst; int off; uint8_t sl; uint32_t idx; uint8_t cls; };
struct bucket { uint64_t src, dst; uint32_t start, count; uint8_t used; };
struct rule_map { struct bucket *b; size_t cap; };

/* the SL matrix: port GUID -> group (open addressing), per source group a row of SLs */
struct gslot { uint64_t guid; uint32_t group; uint8_t used; };
struct matrix {
	struct gslot *g;
	size_t gcap, n_groups;
	uint8_t **row;             /* row[group]: one SL per destination group; NULL: none */
	uint32_t *len;
	size_t n_row;              /* entries of row and len */
	size_t rows;               /* rows given */
};

/* identity of a loaded file: a replaced or rewritten file differs in one of these */
struct fkey { dev_t dev; ino_t ino; off_t size; long long mtime_ns; };

struct fr {
	osm_opensm_t *osm;
	char dir[4096];
	struct fkey keys[2];       /* sl2vl.dump, path-sl.txt as loaded */
	struct node_tbl *nodes;
	size_t n_nodes;
	size_t n_rows;
	struct rule *rules;        /* sorted by (cls, src, dst, idx) */
	size_t n_rules;
	struct rule_map maps[4];   /* by wildcard class: 0 src+dst, 1 src+any, 2 any+dst, 3 any+any */
	struct matrix mx;          /* where no rule matches */
	/* the wrapped file engine */
	void *file_ctx;
	int (*file_lid_matrices)(void *);
	int (*file_fwd_tables)(void *);
	void (*file_dump)(void *);
	/* statistics */
	unsigned long sl2vl_calls, sl2vl_missing, path_calls, path_nomatch, path_unknown_lid;
};

static void logmsg(struct fr *fr, osm_log_level_t lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logmsg(struct fr *fr, osm_log_level_t lvl, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	osm_log(&fr->osm->log, lvl, TAG "%s\n", buf);
}

static int cmp_node(const void *a, const void *b)
{
	uint64_t x = ((const struct node_tbl *)a)->guid, y = ((const struct node_tbl *)b)->guid;
	return x < y ? -1 : x > y;
}

static struct node_tbl *find_node(struct fr *fr, uint64_t guid)
{
	struct node_tbl key = { .guid = guid };
	return bsearch(&key, fr->nodes, fr->n_nodes, sizeof(key), cmp_node);
}

static int finish_node(struct fr *fr, uint64_t guid, struct row *rows, size_t n)
{
	struct node_tbl *t;
	unsigned maxp = 0, w;
	size_t i;

	for (i = 0; i < n; i++) {
		if (rows[i].in > maxp) maxp = rows[i].in;
		if (rows[i].out > maxp) maxp = rows[i].out;
	}
	w = maxp + 1;
	t = &fr->nodes[fr->n_nodes++];
	t->guid = guid;
	t->maxp = maxp;
	t->raw = calloc((size_t)w * w, 8);
	t->have = calloc((size_t)w * w, 1);
	if (!t->raw || !t->have)
		return -1;
	for (i = 0; i < n; i++) {
		size_t k = (size_t)rows[i].in * w + rows[i].out;
		memcpy(t->raw + 8 * k, rows[i].raw, 8);
		t->have[k] = 1;
	}
	fr->n_rows += n;
	return 0;
}

/* sl2vl.dump: "Switch 0x<guid>, ..." / "Channel Adapter 0x<guid>, ..." headers, then rows
 * "<in> <out> : <vl0> .. <vl15>"; '#' comments and blank lines skipped. */
static int load_sl2vl(struct fr *fr, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned lineno = 0;
	size_t cap_nodes = 64, n_rows = 0, cap_rows = 1024;
	struct row *rows;
	uint64_t cur = 0;
	int have_cur = 0;

	if (!f) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	fr->nodes = calloc(cap_nodes, sizeof(*fr->nodes));
	rows = malloc(cap_rows * sizeof(*rows));
	if (!fr->nodes || !rows)
		goto oom;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *q;
		lineno++;
		while (isspace((unsigned char)*p)) p++;
		if (!*p || *p == '#')
			continue;
		if (!strncmp(p, "Switch 0x", 9) || !strncmp(p, "Channel Adapter 0x", 18) ||
		    !strncmp(p, "Router 0x", 9)) {
			if (have_cur) {
				if (fr->n_nodes == cap_nodes) {
					cap_nodes *= 2;
					fr->nodes = realloc(fr->nodes, cap_nodes * sizeof(*fr->nodes));
					if (!fr->nodes) goto oom;
				}
				if (finish_node(fr, cur, rows, n_rows)) goto oom;
			}
			p = strstr(p, "0x") + 2;
			cur = strtoull(p, &q, 16);
			if (q == p) {
				logmsg(fr, OSM_LOG_ERROR, "ERROR %s:%u: cannot parse GUID", path, lineno);
				goto bad;
			}
			have_cur = 1;
			n_rows = 0;
		} else if (isdigit((unsigned char)*p)) {
			struct row r;
			unsigned sl, vl;
			if (!have_cur) {
				logmsg(fr, OSM_LOG_ERROR, "ERROR %s:%u: row before any node line",
				       path, lineno);
				goto bad;
			}
			r.in = strtoul(p, &q, 10);
			p = q;
			r.out = strtoul(p, &q, 10);
			if (q == p || r.in > 254 || r.out > 254) goto badrow;
			p = q;
			while (isspace((unsigned char)*p)) p++;
			if (*p++ != ':') goto badrow;
			memset(r.raw, 0, 8);
			for (sl = 0; sl < 16; sl++) {
				vl = strtoul(p, &q, 10);
				if (q == p || vl > 15) goto badrow;
				p = q;
				r.raw[sl / 2] |= (sl % 2) ? vl : vl << 4;   /* SL even: high nibble */
			}
			if (n_rows == cap_rows) {
				cap_rows *= 2;
				rows = realloc(rows, cap_rows * sizeof(*rows));
				if (!rows) goto oom;
			}
			rows[n_rows++] = r;
		}
		continue;
badrow:
		logmsg(fr, OSM_LOG_ERROR, "ERROR %s:%u: not '<in> <out> : <16 VLs>'", path, lineno);
		goto bad;
	}
	if (have_cur) {
		if (fr->n_nodes == cap_nodes) {
			fr->nodes = realloc(fr->nodes, (cap_nodes + 1) * sizeof(*fr->nodes));
			if (!fr->nodes) goto oom;
		}
		if (finish_node(fr, cur, rows, n_rows)) goto oom;
	}
	free(rows);
	fclose(f);
	qsort(fr->nodes, fr->n_nodes, sizeof(*fr->nodes), cmp_node);
	return 0;
oom:
	logmsg(fr, OSM_LOG_ERROR, "ERROR out of memory reading %s", path);
bad:
	free(rows);
	fclose(f);
	return -1;
}

/* ---- path-sl.txt ---- */
static uint64_t mix(uint64_t s, uint64_t d)
{
	uint64_t h = s * 0x9E3779B97F4A7C15ull ^ (d + 0x632BE59BD9B4E019ull + (s << 6) + (s >> 2));
	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 29);
}

static struct bucket *map_slot(struct rule_map *m, uint64_t s, uint64_t d)
{
	size_t i = mix(s, d) & (m->cap - 1);
	while (m->b[i].used && (m->b[i].src != s || m->b[i].dst != d))
		i = (i + 1) & (m->cap - 1);
	return &m->b[i];
}

static int cmp_rule(const void *a, const void *b)
{
	const struct rule *x = a, *y = b;
	if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
	if (x->src != y->src) return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int parse_guid_col(const char *tok, uint64_t *out)
{
	char *e;
	if (!strcmp(tok, "*")) { *out = WILD; return 0; }
	errno = 0;
	*out = strtoull(tok, &e, 0);
	return (*e || errno || *out == WILD) ? -1 : 0;
}

static struct gslot *group_slot(struct matrix *m, uint64_t guid)
{
	size_t i = mix(guid, 0) & (m->gcap - 1);
	while (m->g[i].used && m->g[i].guid != guid)
		i = (i + 1) & (m->gcap - 1);
	return &m->g[i];
}

static long group_of(struct matrix *m, uint64_t guid)
{
	struct gslot *e;
	if (!m->gcap)
		return -1;
	e = group_slot(m, guid);
	return e->used ? (long)e->group : -1;
}

/* "group <port GUID> <group>": 0 added, 1 bad (listed twice), -1 out of memory */
static int add_group(struct matrix *m, uint64_t guid, uint32_t group)
{
	struct gslot *e;
	if (2 * (m->n_groups + 1) > m->gcap) {          /* keep the table at most half full */
		struct matrix bigger = *m;
		size_t i;
		bigger.gcap = m->gcap ? 2 * m->gcap : 1024;
		bigger.g = calloc(bigger.gcap, sizeof(*bigger.g));
		if (!bigger.g)
			return -1;
		for (i = 0; i < m->gcap; i++)
			if (m->g[i].used)
				*group_slot(&bigger, m->g[i].guid) = m->g[i];
		free(m->g);
		m->g = bigger.g;
		m->gcap = bigger.gcap;
	}
	e = group_slot(m, guid);
	if (e->used)
		return 1;
	e->used = 1;
	e->guid = guid;
	e->group = group;
	m->n_groups++;
	return 0;
}

/* "row <group> <hex SLs>": 0 added, 1 bad, -1 out of memory */
static int add_row(struct matrix *m, uint32_t group, const char *hex)
{
	size_t n = strlen(hex), i;
	uint8_t *r;
	if (group >= m->n_row) {
		size_t cap = m->n_row ? m->n_row : 256;
		uint8_t **row;
		uint32_t *len;
		while (cap <= group) cap *= 2;
		row = realloc(m->row, cap * sizeof(*row));
		if (!row) return -1;
		m->row = row;
		len = realloc(m->len, cap * sizeof(*len));
		if (!len) return -1;
		m->len = len;
		memset(m->row + m->n_row, 0, (cap - m->n_row) * sizeof(*row));
		memset(m->len + m->n_row, 0, (cap - m->n_row) * sizeof(*len));
		m->n_row = cap;
	}
	if (m->row[group] || n > 65536)
		return 1;
	r = malloc(n ? n : 1);
	if (!r) return -1;
	for (i = 0; i < n; i++) {
		int c = tolower((unsigned char)hex[i]);
		if (c >= '0' && c <= '9') r[i] = (uint8_t)(c - '0');
		else if (c >= 'a' && c <= 'f') r[i] = (uint8_t)(c - 'a' + 10);
		else { free(r); return 1; }
	}
	m->row[group] = r;
	m->len[group] = (uint32_t)n;
	m->rows++;
	return 0;
}

static void matrix_free(struct matrix *m)
{
	size_t i;
	for (i = 0; i < m->n_row; i++)
		free(m->row[i]);
	free(m->row);
	free(m->len);
	free(m->g);
	memset(m, 0, sizeof(*m));
}

/* the matrix's SL of (src port, dst port); -1 if it gives none */
static int matrix_sl(struct matrix *m, uint64_t src, uint64_t dst)
{
	long gs = group_of(m, src), gd = group_of(m, dst);
	if (gs < 0 || gd < 0 || (size_t)gs >= m->n_row || !m->row[gs] || gd >= (long)m->len[gs])
		return -1;
	return m->row[gs][gd];
}

static int load_path_sl(struct fr *fr, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t line_cap = 0;
	unsigned lineno = 0;
	size_t cap = 256, i, cls_n[4] = { 0 };

	if (!f) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	fr->rules = malloc(cap * sizeof(*fr->rules));
	if (!fr->rules) goto oom;
	while (getline(&line, &line_cap, f) > 0) {
		char *tok[5], *save = NULL, *p;
		int n = 0, rc;
		struct rule r;
		unsigned long v;
		lineno++;
		if ((p = strchr(line, '#')))
			*p = 0;
		for (p = strtok_r(line, " \t\r\n", &save); p && n < 5;
		     p = strtok_r(NULL, " \t\r\n", &save))
			tok[n++] = p;
		if (!n)
			continue;
		if (!strcmp(tok[0], "group") || !strcmp(tok[0], "row")) {
			if (n != 3)
				goto badmatrix;
			if (tok[0][0] == 'g') {
				uint64_t guid;
				if (parse_guid_col(tok[1], &guid) || guid == WILD)
					goto badmatrix;
				v = strtoul(tok[2], &p, 0);
				if (*p || v > 65535)
					goto badmatrix;
				rc = add_group(&fr->mx, guid, (uint32_t)v);
			} else {
				v = strtoul(tok[1], &p, 0);
				if (*p || v > 65535)
					goto badmatrix;
				rc = add_row(&fr->mx, (uint32_t)v, tok[2]);
			}
			if (rc < 0)
				goto oom;
			if (rc)
				goto badmatrix;
			continue;
		}
		if (n != 4 || parse_guid_col(tok[0], &r.src) || parse_guid_col(tok[1], &r.dst))
			goto badline;
		if (!strcmp(tok[2], "*"))
			r.off = ANY_OFF;
		else {
			v = strtoul(tok[2], &p, 0);
			if (*p || v > 127) goto badline;
			r.off = (int)v;
		}
		v = strtoul(tok[3], &p, 0);
		if (*p || v > 15) goto badline;
		r.sl = (uint8_t)v;
		r.idx = (uint32_t)fr->n_rules;
		r.cls = (r.src == WILD) * 2 + (r.dst == WILD);
		cls_n[r.cls]++;
		if (fr->n_rules == cap) {
			cap *= 2;
			fr->rules = realloc(fr->rules, cap * sizeof(*fr->rules));
			if (!fr->rules) goto oom;
		}
		fr->rules[fr->n_rules++] = r;
		continue;
badline:
		logmsg(fr, OSM_LOG_ERROR, "ERROR %s:%u: not 'src dst offset|* sl'", path, lineno);
		free(line);
		fclose(f);
		return -1;
badmatrix:
		logmsg(fr, OSM_LOG_ERROR, "ERROR %s:%u: not 'group port_guid group' or 'row group "
		       "hex_sls' (groups 0-65535, each listed once)", path, lineno);
		free(line);
		fclose(f);
		return -1;
	}
	free(line);
	fclose(f);
	f = NULL;
	qsort(fr->rules, fr->n_rules, sizeof(*fr->rules), cmp_rule);
	for (i = 0; i < 4; i++) {
		size_t c = 4;
		while (c < 2 * cls_n[i] + 2) c *= 2;
		fr->maps[i].cap = c;
		fr->maps[i].b = calloc(c, sizeof(struct bucket));
		if (!fr->maps[i].b) goto oom;
	}
	for (i = 0; i < fr->n_rules; i++) {
		struct rule *r = &fr->rules[i];
		struct bucket *b = map_slot(&fr->maps[r->cls], r->src, r->dst);
		if (!b->used) {
			b->used = 1;
			b->src = r->src;
			b->dst = r->dst;
			b->start = (uint32_t)i;
		}
		b->count++;
	}
	return 0;
oom:
	logmsg(fr, OSM_LOG_ERROR, "ERROR out of memory reading %s", path);
	free(line);
	if (f)
		fclose(f);
	return -1;
}

/* the SL of the first rule (file order) matching (src, dst, off); -1 if none */
static int lookup_sl(struct fr *fr, uint64_t src, uint64_t dst, int off)
{
	uint32_t best = UINT32_MAX;
	int sl = -1, c;

	for (c = 0; c < 4; c++) {
		uint64_t s = (c & 2) ? WILD : src, d = (c & 1) ? WILD : dst;
		struct bucket *b;
		uint32_t k;
		if (!fr->maps[c].cap)
			continue;
		b = map_slot(&fr->maps[c], s, d);
		if (!b->used)
			continue;
		for (k = b->start; k < b->start + b->count; k++) {   /* sorted by idx */
			struct rule *r = &fr->rules[k];
			if (r->idx >= best)
				break;
			if (r->off == ANY_OFF || r->off == off) {
				best = r->idx;
				sl = r->sl;
				break;
			}
		}
	}
	return sl;
}

/* ---- loading and live reloading ---- */
static void fr_free(struct fr *fr);

static void file_keys(const struct fr *fr, struct fkey k[2])
{
	static const char *const names[2] = { "sl2vl.dump", "path-sl.txt" };
	char path[4200];
	struct stat st;
	int i;

	memset(k, 0, 2 * sizeof(*k));
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", fr->dir, names[i]);
		if (!stat(path, &st)) {
			k[i].dev = st.st_dev;
			k[i].ino = st.st_ino;
			k[i].size = st.st_size;
			k[i].mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
		}
	}
}

/* read <dir>/sl2vl.dump and <dir>/path-sl.txt into fr (whose tables are empty) */
static int fr_load(struct fr *fr)
{
	char path[4200];

	file_keys(fr, fr->keys);          /* before reading: a later change is seen next pass */
	snprintf(path, sizeof(path), "%s/sl2vl.dump", fr->dir);
	if (load_sl2vl(fr, path))
		return -1;
	snprintf(path, sizeof(path), "%s/path-sl.txt", fr->dir);
	return load_path_sl(fr, path);
}

/* at each routing pass: reload both files if either was replaced since it was loaded */
static void fr_maybe_reload(struct fr *fr)
{
	struct fkey now[2];
	struct fr *tmp, swap;

	file_keys(fr, now);
	if (!memcmp(now, fr->keys, sizeof(now)))
		return;
	tmp = calloc(1, sizeof(*tmp));
	if (!tmp)
		return;
	tmp->osm = fr->osm;
	strcpy(tmp->dir, fr->dir);
	if (fr_load(tmp)) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR reload of %s failed; the tables loaded before "
		       "stay", fr->dir);
		memcpy(fr->keys, tmp->keys, sizeof(fr->keys));   /* no retry until changed again */
		fr_free(tmp);
		return;
	}
	/* swap the tables: tmp takes the old ones and is freed */
	swap = *fr;
	fr->nodes = tmp->nodes; fr->n_nodes = tmp->n_nodes; fr->n_rows = tmp->n_rows;
	fr->rules = tmp->rules; fr->n_rules = tmp->n_rules;
	memcpy(fr->maps, tmp->maps, sizeof(fr->maps));
	fr->mx = tmp->mx;
	memcpy(fr->keys, tmp->keys, sizeof(fr->keys));
	tmp->nodes = swap.nodes; tmp->n_nodes = swap.n_nodes;
	tmp->rules = swap.rules; tmp->n_rules = swap.n_rules;
	memcpy(tmp->maps, swap.maps, sizeof(tmp->maps));
	tmp->mx = swap.mx;
	fr_free(tmp);
	logmsg(fr, OSM_LOG_INFO, "reloaded: %zu SL2VL nodes, %zu (in, out) rows, %zu path SL "
	       "rules, %zu port groups, %zu SL matrix rows from %s", fr->n_nodes, fr->n_rows,
	       fr->n_rules, fr->mx.n_groups, fr->mx.rows, fr->dir);
}

/* ---- routing engine hooks ---- */
static int fr_lid_matrices(void *ctx)
{
	struct fr *fr = ctx;
	fr_maybe_reload(fr);
	return fr->file_lid_matrices ? fr->file_lid_matrices(fr->file_ctx) : 1;
}

static int fr_fwd_tables(void *ctx)
{
	struct fr *fr = ctx;
	return fr->file_fwd_tables ? fr->file_fwd_tables(fr->file_ctx) : 1;
}

static void fr_dump(void *ctx)
{
	struct fr *fr = ctx;
	if (fr->file_dump)
		fr->file_dump(fr->file_ctx);
}

static void fr_update_sl2vl(void *ctx, osm_physp_t *port, uint8_t in, uint8_t out,
			    ib_slvl_table_t *t)
{
	struct fr *fr = ctx;
	osm_node_t *node = osm_physp_get_node_ptr(port);
	uint64_t guid = osm_node_get_type(node) == IB_NODE_TYPE_SWITCH ?
	    cl_ntoh64(osm_node_get_node_guid(node)) : cl_ntoh64(osm_physp_get_port_guid(port));
	struct node_tbl *n = find_node(fr, guid);

	fr->sl2vl_calls++;
	if (n && in <= n->maxp && out <= n->maxp) {
		size_t k = (size_t)in * (n->maxp + 1) + out;
		if (n->have[k]) {
			memcpy(t->raw_vl_by_sl, n->raw + 8 * k, 8);
			return;
		}
	}
	if (fr->sl2vl_missing++ < 10)
		logmsg(fr, OSM_LOG_ERROR, "ERROR no SL2VL row for 0x%016" PRIx64 " in %u out %u; "
		       "OpenSM's default stays", guid, in, out);
}

static uint8_t fr_path_sl(void *ctx, uint8_t hint, const ib_net16_t slid, const ib_net16_t dlid)
{
	struct fr *fr = ctx;
	osm_port_t *sp = osm_get_port_by_lid_ho(&fr->osm->subn, cl_ntoh16(slid));
	osm_port_t *dp = osm_get_port_by_lid_ho(&fr->osm->subn, cl_ntoh16(dlid));
	int sl, off;

	fr->path_calls++;
	if (!sp || !dp) {
		fr->path_unknown_lid++;
		return hint;
	}
	off = (int)cl_ntoh16(dlid) - (int)cl_ntoh16(osm_port_get_base_lid(dp));
	sl = lookup_sl(fr, cl_ntoh64(osm_port_get_guid(sp)), cl_ntoh64(osm_port_get_guid(dp)), off);
	if (sl < 0)
		sl = matrix_sl(&fr->mx, cl_ntoh64(osm_port_get_guid(sp)),
			       cl_ntoh64(osm_port_get_guid(dp)));
	if (sl < 0) {
		fr->path_nomatch++;
		return hint;
	}
	return (uint8_t)sl;
}

static int fr_setup(struct osm_routing_engine *re, osm_opensm_t *osm)
{
	struct fr *fr = re->context;

	if (osm_ucast_file_setup(re, osm)) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR the file engine's setup failed");
		return -1;
	}
	fr->file_ctx = re->context;
	fr->file_lid_matrices = re->build_lid_matrices;
	fr->file_fwd_tables = re->ucast_build_fwd_tables;
	fr->file_dump = re->ucast_dump_tables;
	re->context = fr;
	re->build_lid_matrices = fr_lid_matrices;
	re->ucast_build_fwd_tables = fr_fwd_tables;
	re->ucast_dump_tables = fr->file_dump ? fr_dump : NULL;
	re->update_sl2vl = fr_update_sl2vl;
	re->path_sl = fr_path_sl;
	logmsg(fr, OSM_LOG_INFO, "engine set up (file engine LFTs from %s)",
	       osm->subn.opt.lfts_file ? osm->subn.opt.lfts_file : "(none: -U missing)");
	return 0;
}

/* ---- event plugin ---- */
static void fr_free(struct fr *fr)
{
	size_t i;
	if (!fr)
		return;
	for (i = 0; i < fr->n_nodes; i++) {
		free(fr->nodes[i].raw);
		free(fr->nodes[i].have);
	}
	free(fr->nodes);
	free(fr->rules);
	for (i = 0; i < 4; i++)
		free(fr->maps[i].b);
	matrix_free(&fr->mx);
	free(fr);
}

static void *fr_create(osm_opensm_t *osm)
{
	struct fr *fr = calloc(1, sizeof(*fr));
	const char *dir = osm->subn.opt.event_plugin_options;
	external_routing_engine_module_t mod = { "fabroute", fr_setup, NULL };

	if (!fr)
		return NULL;
	fr->osm = osm;
	if (!dir || !*dir || strlen(dir) >= sizeof(fr->dir)) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR event_plugin_options must name the directory "
		       "holding sl2vl.dump and path-sl.txt");
		goto fail;
	}
	strcpy(fr->dir, dir);
	if (fr_load(fr))
		goto fail;
	mod.context = fr;
	if (osm_register_external_routing_engine(osm, &mod, fr) != CL_SUCCESS) {
		logmsg(fr, OSM_LOG_ERROR, "ERROR cannot register routing engine 'fabroute'");
		goto fail;
	}
	logmsg(fr, OSM_LOG_INFO, "ready: %zu SL2VL nodes, %zu (in, out) rows, %zu path SL rules, "
	       "%zu port groups, %zu SL matrix rows from %s", fr->n_nodes, fr->n_rows, fr->n_rules,
	       fr->mx.n_groups, fr->mx.rows, dir);
	return fr;
fail:
	fr_free(fr);
	return NULL;
}

static void fr_delete(void *data)
{
	/* OpenSM destroys the routing engines before the plugins: nothing uses data now */
	fr_free(data);
}

static void fr_report(void *data, osm_epi_event_id_t id, void *event_data)
{
	struct fr *fr = data;
	(void)event_data;
	if (id == OSM_EVENT_ID_SUBNET_UP)
		logmsg(fr, OSM_LOG_INFO, "stats: update_sl2vl %lu (missing %lu), path_sl %lu "
		       "(no rule %lu, unknown LID %lu)", fr->sl2vl_calls, fr->sl2vl_missing,
		       fr->path_calls, fr->path_nomatch, fr->path_unknown_lid);
}

osm_event_plugin_t osm_event_plugin = {
	.osm_version = OSM_VERSION,
	.create = fr_create,
	.delete = fr_delete,
	.report = fr_report,
};
