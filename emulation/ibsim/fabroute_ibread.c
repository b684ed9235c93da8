/*
 * fabroute_ibread: bulk read-back of SL2VL tables and PathRecord SLs in ONE process.
 *
 * Every infiniband-diags process pays a start-up (umad open, port resolution), and
 * `smpquery sl2vl` reads one (switch, out port) per call, `saquery -p --src-to-dst` one pair
 * per call (a PathRecord GetTable over all pairs is cut to its first MAD: umad2sim does no
 * RMPP).  This reader opens the port once, reads a list of queries from stdin and keeps up to
 * WINDOW of them outstanding (umad_send / umad_recv, matched by transaction ID), reading
 * its input and writing its answers as it goes (memory bounded by RING queries):
 *
 *   S <directed route, e.g. 0,1,5> <attribute modifier>   SubnGet(SLtoVLMappingTable)
 *        -> "ok <VL of SL0> ... <VL of SL15>"      (switch: modifier = in_port << 8 | out_port)
 *   L <directed route> <block>                           SubnGet(LinearForwardingTable)
 *        -> "ok <port of LID 64*block> ... <port of LID 64*block+63>"
 *   P <slid> <dlid>                                      SubnAdmGet(PathRecord), SLID+DLID
 *        -> "ok <sl> <dlid>"
 *   anything that fails -> "err <reason>"
 *
 * One output line per input line, same order.  Directed routes do not depend on the LFTs
 * under test.  Runs under LD_PRELOAD=libumad2sim.so like any diag (SIM_HOST, IBSIM_SOCKNAME).
 * Usage: fabroute_ibread [timeout_ms [window]] < queries > answers
 *
 * Part of fabroute; built at first use (emulation/ibsim/apply.py), cached by source hash:
 *   gcc -O2 -I/usr/include/infiniband -o fabroute_ibread fabroute_ibread.c -libmad -libumad
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>

#define PR_COMPMASK_DLID (1ull << 4)
#define PR_COMPMASK_SLID (1ull << 5)
#define TRID_BASE 0x6a000000u

struct query {
	char kind;              /* 'S', 'L', 'P' or 0 (unparsable) */
	ib_portid_t pid;        /* S, L: directed route */
	uint32_t a, b;          /* S, L: modifier / block; P: slid, dlid */
	char state;             /* 0 waiting, 1 sent, 2 done */
	char out[272];
};

/* Queries live in a ring of RING slots from the oldest unanswered one (`head`) to the last
 * read (`tail`); answers leave in input order as the head is answered, so memory stays
 * O(RING) however many queries come. */
#define RING 8192
static struct query ring[RING];
static uint64_t head, tail;
static int input_done;

static struct query *slot(uint64_t i)
{
	return &ring[i % RING];
}

static void done(struct query *q, const char *s)
{
	snprintf(q->out, sizeof(q->out), "%s", s);
	q->state = 2;
}

/* Read one query into the ring's tail; 0 at the end of the input. */
static int read_query(void)
{
	char line[1024], kind, arg1[512];
	unsigned long a2;
	struct query *q;

	if (input_done || !fgets(line, sizeof(line), stdin)) {
		input_done = 1;
		return 0;
	}
	q = slot(tail++);
	memset(q, 0, sizeof(*q));
	if (sscanf(line, " %c %511s %lu", &kind, arg1, &a2) != 3) {
		done(q, "err parse");
		return 1;
	}
	q->kind = kind;
	q->b = (uint32_t)a2;
	if (kind == 'S' || kind == 'L') {
		q->a = (uint32_t)a2;
		if (str2drpath(&q->pid.drpath, arg1, 0, 0) < 0)
			done(q, "err drpath");
	} else if (kind == 'P') {
		q->a = (uint32_t)strtoul(arg1, NULL, 0);
	} else
		done(q, "err kind");
	return 1;
}

/* Print and drop the answered queries at the head. */
static void flush_head(void)
{
	while (head < tail && slot(head)->state == 2)
		printf("%s\n", slot(head++)->out);
}

int main(int argc, char **argv)
{
	int classes[] = { IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS };
	int timeout = argc > 1 ? atoi(argv[1]) : 500;
	size_t window = argc > 2 ? (size_t)atoi(argv[2]) : 32;
	struct ibmad_port *port;
	ib_portid_t sm_id = { 0 };
	int fd, smi_agent, sa_agent, have_sm = -1;
	uint64_t i, next = 0;
	size_t outstanding = 0;
	/* twice the MAD: umad2sim writes past umad_size() + IB_MAD_SIZE on receive (seen as
	 * heap corruption in mad_rpc_close_port) */
	void *umad = umad_alloc(1, umad_size() + 2 * IB_MAD_SIZE);
	void *rumad = umad_alloc(1, umad_size() + 2 * IB_MAD_SIZE);

	port = mad_rpc_open_port(NULL, 0, classes, 3);
	if (!port || !umad || !rumad) {
		fprintf(stderr, "fabroute_ibread: cannot open the local IB port: %s\n",
			strerror(errno));
		return 2;
	}
	mad_rpc_set_timeout(port, timeout);
	fd = mad_rpc_portid(port);
	smi_agent = mad_rpc_class_agent(port, IB_SMI_DIRECT_CLASS);
	sa_agent = mad_rpc_class_agent(port, IB_SA_CLASS);
	if (window < 1)
		window = 1;
	if (window > RING / 2)
		window = RING / 2;

	for (;;) {
		int len, rc;
		uint8_t *mad;
		uint32_t tid;
		struct query *q;

		/* send while the window and the ring have room; read input as it is needed */
		while (outstanding < window) {
			ib_rpc_t rpc = { 0 };
			uint8_t data[IB_MAD_SIZE];
			int agent;
			if (next == tail && (tail - head >= RING || !read_query()))
				break;
			q = slot(next);
			if (q->state) {
				next++;
				continue;
			}
			if (q->kind == 'P' && have_sm < 0) {
				/* the SM's LID, once, before the first SA query; nothing else is in
				 * flight then (ib_resolve_smlid_via drops answers not its own) */
				if (outstanding)
					break;
				have_sm = ib_resolve_smlid_via(&sm_id, timeout, port) >= 0 && sm_id.lid;
				sm_id.qp = 1;
				sm_id.qkey = IB_DEFAULT_QP1_QKEY;
			}
			if (q->kind == 'P' && !have_sm) {
				done(q, "err no_sm");
				next++;
				continue;
			}
			memset(data, 0, sizeof(data));
			memset(umad, 0, umad_size() + IB_MAD_SIZE);
			rpc.method = IB_MAD_METHOD_GET;
			rpc.trid = (uint32_t)(TRID_BASE + next);  /* unique in the window */
			rpc.timeout = timeout;
			if (q->kind == 'S' || q->kind == 'L') {
				rpc.mgtclass = IB_SMI_DIRECT_CLASS;
				rpc.attr.id = q->kind == 'S' ? IB_ATTR_SLVL_TABLE : IB_ATTR_LINEARFORWTBL;
				rpc.attr.mod = q->a;
				rpc.datasz = IB_SMP_DATA_SIZE;
				rpc.dataoffs = IB_SMP_DATA_OFFS;
				rc = mad_build_pkt(umad, &rpc, &q->pid, NULL, data);
				agent = smi_agent;
			} else {
				rpc.mgtclass = IB_SA_CLASS;
				rpc.attr.id = IB_SA_ATTR_PATHRECORD;
				rpc.mask = PR_COMPMASK_SLID | PR_COMPMASK_DLID;
				rpc.datasz = IB_SA_DATA_SIZE;
				rpc.dataoffs = IB_SA_DATA_OFFS;
				mad_set_field(data, 0, IB_SA_PR_SLID_F, q->a);
				mad_set_field(data, 0, IB_SA_PR_DLID_F, q->b);
				rc = mad_build_pkt(umad, &rpc, &sm_id, NULL, data);
				agent = sa_agent;
			}
			if (rc < 0 || umad_send(fd, agent, umad, IB_MAD_SIZE, timeout, 2) < 0) {
				done(q, "err send");
			} else {
				q->state = 1;
				outstanding++;
			}
			next++;
		}
		flush_head();
		if (!outstanding) {
			if (next == tail && input_done)
				break;
			continue;
		}
		len = IB_MAD_SIZE;
		rc = umad_recv(fd, rumad, &len, 4 * timeout + 1000);
		if (rc < 0) {   /* nothing came back in time: give up on what is in flight */
			for (i = head; i < next; i++)
				if (slot(i)->state == 1)
					done(slot(i), "err timeout");
			outstanding = 0;
			continue;
		}
		mad = umad_get_mad(rumad);
		tid = (uint32_t)mad_get_field64(mad, 0, IB_MAD_TRID_F) - (uint32_t)(TRID_BASE + head);
		if (tid >= next - head || slot(head + tid)->state != 1)
			continue;   /* not ours, or a late duplicate */
		q = slot(head + tid);
		outstanding--;
		if (umad_status(rumad)) {
			done(q, "err no_response");
		} else if (q->kind == 'S' || q->kind == 'L') {
			unsigned st = mad_get_field(mad, 0, IB_DRSMP_STATUS_F);
			uint8_t *d = mad + IB_SMP_DATA_OFFS;
			int k, n = 2;
			if (st) {
				snprintf(q->out, sizeof(q->out), "err status_0x%x", st);
			} else if (q->kind == 'S') {
				memcpy(q->out, "ok", 3);
				for (k = 0; k < 16; k++)
					n += snprintf(q->out + n, sizeof(q->out) - n, " %u",
						      (k % 2) ? d[k / 2] & 0xf : d[k / 2] >> 4);
			} else {
				memcpy(q->out, "ok", 3);
				for (k = 0; k < 64; k++)
					n += snprintf(q->out + n, sizeof(q->out) - n, " %u", d[k]);
			}
			q->state = 2;
		} else {
			unsigned st = mad_get_field(mad, 0, IB_MAD_STATUS_F);
			uint8_t *d = mad + IB_SA_DATA_OFFS;
			if (st)
				snprintf(q->out, sizeof(q->out), "err status_0x%x", st);
			else
				snprintf(q->out, sizeof(q->out), "ok %u %u",
					 mad_get_field(d, 0, IB_SA_PR_SL_F),
					 mad_get_field(d, 0, IB_SA_PR_DLID_F));
			q->state = 2;
		}
	}
	flush_head();
	fflush(stdout);
	mad_rpc_close_port(port);
	return 0;
}
