"""The compiled core of the flit-level simulator (Numba, structure-of-arrays state).

Nothing here is a second routing implementation: :func:`step_c` is the compiled twin of
:meth:`tablegen.tables.TableSet.step` (same header state, same exit rules, same VC increment
with saturation) running over the packed arrays of a :class:`~tablegen.tables.TableSet`
(:class:`Packed`), and the UGAL decisions call the functions of :mod:`tablegen.routing.ugal`, compiled
with ``numba.njit`` as they are.

Router model (one cycle = one flit time on a channel; see ``docs/simulator.md``):

* every switch has ``R`` network input ports with ``V`` VCs each and one injection port per
  host (one VC); every input VC is a FIFO of packets with ``buffer_depth`` flits of space;
* credit-based flow control per output VC.  Virtual cut-through (``vct``): a packet is
  forwarded only when the downstream VC has credits for the whole packet, and moves as a unit
  (its flits occupy the crossbar and the channel for ``packet_size`` slots); credits return
  ``credit_latency`` cycles after the packet leaves the downstream buffer.  Wormhole
  (``wormhole``): flits move one at a time; a head flit needs a *free* output VC (held by its
  packet until the tail flit has crossed the crossbar) and one credit, every flit needs one
  credit, so a packet may span several routers and a buffer may be shorter than a packet;
  credits return per flit;
* a packet becomes eligible for switch allocation ``router_delay`` cycles after its head
  arrived (routing, VC and switch allocation pipeline); the route (out port, out VC) is
  computed by :func:`step_c` when the packet reaches the head of its input VC;
* switch allocation: separable, input-first, round-robin at both stages (``rr``), or iSLIP
  (``islip``: every input requests every output it has a ready head for; round-robin grant
  and accept pointers moved only by first-iteration matches; ``islip_iterations``); with internal
  ``speedup`` S the crossbar runs S allocation rounds per cycle and moves S flits per cycle per
  input and per output into an output queue (``output_buffer`` flits), which feeds the
  channel at one flit per cycle; a fractional S (2.5) runs ``floor((t + 1) S) - floor(t S)``
  rounds in cycle ``t`` (2, 3, 2, 3 ...) on slots numbered on across cycles;
* channels have ``channel_latency`` cycles, terminal channels ``terminal_latency``;
* PAR (``prm[P_REROUTE]``, the re-route class): a minimal packet is decided again, by the
  same UGAL-L rule, at its second switch (on a Dragonfly only after a local first hop);
* UGAL-L_CR (``prm[P_CR]``, Kim et al. §4.3, VCT): every credit carries the round trip of its
  channel (packet sent to credit back), which sets that output's ``t_d = t_crt - t_crt0``;
  credits a router returns upstream are delayed by ``t_d(out) - min_o t_d(o)`` over its
  network outputs, except across global channels.  Delayed credits arrive out of order, so
  they wait in a binary heap by due time instead of the credit FIFO.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from simulator.heap import hp_pop, hp_push
from tablegen.routing import ugal as _ugal
from tablegen.routing.imported import IMPORTED

# compiled copies of tablegen.routing.ugal's decision rules (the same Python functions, compiled)
ugal_kim = njit(cache=True)(_ugal.ugal_kim)
ugal_kim_vch = njit(cache=True)(_ugal.ugal_kim_vch)
ugal_yebenes = njit(cache=True)(_ugal.ugal_yebenes)

# path-class encodings
T0_SWITCH, T0_GROUP, T0_DST = 0, 1, 2
EXIT_NONE, EXIT_REACH, EXIT_ON_PATH, EXIT_FIRST_HOP, EXIT_PORT = 0, 1, 2, 3, 4
INTER_NONE, INTER_SWITCH, INTER_3H, INTER_GROUP = 0, 1, 2, 3
DELIVER, NO_ROUTE = -1, -2

# routing modes and rules (MODE_SDN: the class drawn with the share a controller decided,
# simulator/sdn.py; MODE_DST_HOST: imported tables, the destination host's index and a uniform
# LID offset pick the class, tablegen/routing/imported.py)
MODE_FIXED, MODE_UGAL_L, MODE_UGAL_G, MODE_SDN, MODE_DST_HOST = 0, 1, 2, 3, 4
RULE_KIM, RULE_YEBENES, RULE_VCH = 0, 1, 2
GREAD_BACKLOG_HOPS, GREAD_BACKLOG, GREAD_CREDITS_HOPS = 0, 1, 2

# run status
ST_OK, ST_DEADLOCK, ST_NO_ROUTE, ST_POOL = 0, 1, 2, 3

# indices into the integer parameter vector ``prm``
(P_ROUTER_DELAY, P_CHAN_LAT, P_TERM_LAT, P_CREDIT_LAT, P_SIZE, P_DEPTH, P_INJ_CAP, P_OQ_FLITS,
 P_SPEEDUP, P_MODE, P_RULE, P_THRESHOLD, P_GREAD, P_DEADLOCK, P_SQ_CAP, P_NGROUPS,
 P_MEAS_START, P_MEAS_END, P_DF_GLOBAL, P_ALLOC, P_ITERS, P_FC, P_SDN_SLOTS, P_REROUTE, P_CR,
 P_SPEEDUP_DEN, P_VCALLOC, P_LAYERS, P_NPRM) = range(29)

# switch allocators
ALLOC_RR, ALLOC_ISLIP = 0, 1

# flow control
FC_VCT, FC_WORMHOLE = 0, 1

# indices into the statistics vector ``st``
(S_LAB_GEN, S_LAB_DEL, S_LAB_LAT, S_LAB_NETLAT, S_LAB_HOPS, S_LAB_NONMIN, S_WIN_EJ_FLITS,
 S_WIN_GEN_FLITS, S_ALL_DEL, S_ALL_LAT, S_OVERFLOW, S_LAST_MOVE, S_LAB_LAT_MAX, S_FLIT_HOPS,
 S_FREE_TOP, S_CE_HEAD, S_CE_TAIL, S_ERR_U, S_ERR_PK, S_LAB_MIN_LAT, S_LAB_MIN_CNT,
 S_ROUTER_CYCLES, S_LAB_NM_LAT, S_LAB_OVERFLOW, S_FE_HEAD, S_FE_TAIL, S_IE_HEAD, S_IE_TAIL,
 S_HP_N, S_LAB_REROUTED, S_NST) = range(31)


# ---------------------------------------------------------------------------------------------
# the compiled twin of TableSet.step
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def on_path_c(u, src, dst, adj, tab):
    """Whether ``u`` lies on the table path ``src -> dst`` of ``tab`` (TableSet.on_path)."""
    x = src
    seen = 0
    n = adj.shape[0]
    while True:
        if x == u:
            return True
        if x == dst or seen > n:
            return False
        x = adj[x, tab[x, dst]]
        seen += 1


@njit(cache=True, inline="always")
def step_c(u, dst, phase, inter, vc, c, T, cls_t0, cls_t1, cls_target0, cls_exit, onpath_t,
           group, adj, exit_port, vc_inc, num_vcs):
    """Compiled twin of :meth:`TableSet.step`: process header ``(dst, phase, inter, vc)`` of a
    class-``c`` packet at switch ``u``.

    Returns ``(j, vc, phase', vc')``: the network port index ``j`` (:data:`DELIVER` when the
    packet is delivered at ``u``, :data:`NO_ROUTE` for a missing entry), the VC of this hop
    and the new header fields.  The five rules in order: arrival exit (``reach`` /
    ``on_path``), delivery, lookup, departure exit (``first_hop`` / ``port``), VC increment
    saturating at ``num_vcs - 1``.
    """
    ex = cls_exit[c]
    t0 = cls_target0[c]
    if phase == 0:
        if ex == EXIT_REACH:
            here = u if t0 == T0_SWITCH else group[u]
            if here == inter:
                phase = 1
        elif ex == EXIT_ON_PATH and on_path_c(u, inter, dst, adj, T[onpath_t]):
            phase = 1
    if u == dst and (phase == 1 or t0 == T0_DST):
        return DELIVER, vc, phase, vc
    if phase == 0:
        target = dst if t0 == T0_DST else inter
        j = T[cls_t0[c], u, target]
        if j >= 0 and (ex == EXIT_FIRST_HOP or (ex == EXIT_PORT and exit_port[u, j])):
            phase = 1
    else:
        j = T[cls_t1[c], u, dst]
    if j < 0:
        return NO_ROUTE, vc, phase, vc
    nvc = vc + vc_inc[u, j]
    if nvc > num_vcs - 1:
        nvc = num_vcs - 1
    return j, vc, phase, nvc


@njit(cache=True)
def start_c(src, dst, c, inter, cls_t0, cls_target0, cls_vcbase):
    """``TableSet.start``: ``(phase, inter, vc)`` a source writes for class ``c``."""
    if cls_t0[c] < 0:
        return 1, -1, cls_vcbase[c]
    if cls_target0[c] == T0_DST:
        return 0, -1, cls_vcbase[c]
    return 0, inter, cls_vcbase[c]


@njit(cache=True)
def walk_c(src, dst, c, inter, T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase, onpath_t,
           group, adj, exit_port, vc_inc, num_vcs, sw_out, port_out, vc_out):
    """Walk the tables with :func:`step_c` from ``src`` (TableSet.walk): fills switches, port
    indices and VCs; returns the hop count, or ``-1`` on a dead end or loop."""
    phase, inter, vc = start_c(src, dst, c, inter, cls_t0, cls_target0, cls_vcbase)
    u = src
    hops = 0
    sw_out[0] = src
    limit = sw_out.shape[0] - 1
    while True:
        j, v, phase, vc = step_c(u, dst, phase, inter, vc, c, T, cls_t0, cls_t1, cls_target0,
                                 cls_exit, onpath_t, group, adj, exit_port, vc_inc, num_vcs)
        if j == DELIVER:
            return hops
        if j == NO_ROUTE or hops >= limit:
            return -1
        port_out[hops] = j
        vc_out[hops] = v
        u = adj[u, j]
        hops += 1
        sw_out[hops] = u


class Packed:
    """The arrays of a :class:`~tablegen.tables.TableSet` in the layout the compiled code
    reads: tables stacked into ``T[k, N, maxT]`` (padded with -1) and per-class integer codes."""

    def __init__(self, ts):
        topo = ts.topo
        names = list(ts.tables)
        n = topo.n_switches
        width = max(t.shape[1] for t in ts.tables.values())
        self.T = np.full((len(names), n, width), -1, dtype=np.int16)
        for k, name in enumerate(names):
            t = ts.tables[name]
            self.T[k, :, :t.shape[1]] = t
        idx = {name: k for k, name in enumerate(names)}
        cl = ts.classes
        self.cls_names = [c.name for c in cl]
        self.cls_t0 = np.array([idx[c.table0] if c.table0 else -1 for c in cl], dtype=np.int64)
        self.cls_t1 = np.array([idx[c.table1] for c in cl], dtype=np.int64)
        self.cls_target0 = np.array([{"switch": T0_SWITCH, "group": T0_GROUP, "dst": T0_DST}
                                     [c.target0] for c in cl], dtype=np.int64)
        self.cls_exit = np.array([EXIT_NONE if c.table0 is None else
                                  {"reach": EXIT_REACH, "on_path": EXIT_ON_PATH,
                                   "first_hop": EXIT_FIRST_HOP, "port": EXIT_PORT}[c.exit]
                                  for c in cl], dtype=np.int64)
        self.cls_vcbase = np.array([c.vc_base for c in cl], dtype=np.int64)
        self.cls_inter = np.array([{"none": INTER_NONE, "switch": INTER_SWITCH,
                                    "switch-3h": INTER_3H, "group": INTER_GROUP}[c.inter]
                                   for c in cl], dtype=np.int64)
        # an imported set's classes are destinations, not minimal and non-minimal choices
        self.cls_nonmin = np.array([c.name != "min" and ts.routing != IMPORTED for c in cl],
                                   dtype=np.bool_)
        self.onpath_t = idx[cl[-1].table1]
        self.group = topo.group.astype(np.int64)
        self.adj = topo.adj.astype(np.int64)
        self.peer = topo.peer.astype(np.int64)
        self.exit_port = (ts.exit_port if ts.exit_port is not None
                          else np.zeros(topo.adj.shape, dtype=np.bool_)).astype(np.bool_)
        self.vc_inc = ts.vc_inc.astype(np.int64)
        self.num_vcs = int(ts.num_vcs)
        self.n_groups = topo.n_groups
        # VAL_3h: first-hop ports that turn around, per (src, dst) (TableSet.candidates)
        self.bad3h = np.zeros((1, 1), dtype=np.uint64)
        if (self.cls_inter == INTER_3H).any():
            c = int(np.flatnonzero(self.cls_inter == INTER_3H)[0])
            self.bad3h = bad_first_hops(self.adj, self.T[self.cls_t0[c]], self.T[self.cls_t1[c]])

    def step_args(self):
        return (self.T, self.cls_t0, self.cls_t1, self.cls_target0, self.cls_exit,
                self.onpath_t, self.group, self.adj, self.exit_port, self.vc_inc, self.num_vcs)

    def walk(self, src: int, dst: int, c: int, inter: int = -1) -> dict:
        """``TableSet.walk`` through the compiled step (switches, port indices, VCs)."""
        lim = 4 * self.adj.shape[0] + 4
        sw = np.empty(lim + 1, np.int64)
        po = np.empty(lim, np.int64)
        vc = np.empty(lim, np.int64)
        h = walk_c(src, dst, c, inter, self.T, self.cls_t0, self.cls_t1, self.cls_target0,
                   self.cls_exit, self.cls_vcbase, self.onpath_t, self.group, self.adj,
                   self.exit_port, self.vc_inc, self.num_vcs, sw, po, vc)
        if h < 0:
            raise RuntimeError(f"compiled walk {src} -> {dst} via {inter}: dead end or loop")
        return {"switches": sw[:h + 1].tolist(), "ports": po[:h].tolist(), "vcs": vc[:h].tolist()}


@njit(cache=True)
def bad_first_hops(adj, t0, t1):
    """``bad[s, d]``: bit ``j`` set when the VAL_3h first hop on port ``j`` of ``s`` turns
    around (the phase-1 path from the neighbour back to ``d`` passes ``s``) and ``s`` has a
    first hop that does not (TableSet.candidates' ``switch-3h`` rule)."""
    n, r = adj.shape
    bad = np.zeros((n, n), dtype=np.uint64)
    for s in range(n):
        for d in range(n):
            if d == s:
                continue
            mask = np.uint64(0)
            fine = False
            for j in range(r):
                nb = adj[s, j]
                if nb < 0:
                    continue
                back = False
                x = nb
                steps = 0
                while x != d and steps <= n:
                    if x == s:
                        back = True
                        break
                    x = adj[x, t1[x, d]]
                    steps += 1
                if back:
                    mask |= np.uint64(1) << np.uint64(j)
                else:
                    fine = True
            bad[s, d] = mask if fine else np.uint64(0)
    return bad


@njit(cache=True)
def sample_inter(src, dst, kind, n, n_groups, group, adj, t0, bad3h):
    """A random intermediate of the kind ``TableSet.candidates`` allows (uniform over them)."""
    m = n_groups if kind == INTER_GROUP else n
    while True:
        i = np.random.randint(m)
        if inter_allowed(src, dst, i, kind, group, t0, bad3h):
            return i


@njit(cache=True, inline="always")
def inter_allowed(s, d, i, kind, group, t0, bad3h):
    """Whether ``i`` is one of the intermediates ``TableSet.candidates`` allows for
    ``s -> d`` (a group for group-level Valiant)."""
    if kind == INTER_GROUP:
        return i != group[s] and i != group[d]
    if i == s or i == d:
        return False
    return not (kind == INTER_3H and (bad3h[s, d] >> np.uint64(t0[s, i])) & np.uint64(1))


# ---------------------------------------------------------------------------------------------
# the cycle loop
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _occ_port(u, j, R, V, NP, depth, credits, oq_flits):
    s = 0
    for v in range(V):
        s += depth - credits[(u * R + j) * V + v]
    return s + oq_flits[u * NP + j]


@njit(cache=True)
def _path_reading(src, dst, c, inter, pk_args, R, V, NP, depth, credits, oq_flits, backlog,
                  is_global, df_global, gread, tmp_sw, tmp_po, tmp_vc):
    """UGAL-G: the queue reading of a path with global knowledge and its hop count.

    Dragonfly (``df_global``): the path's first global channel (the one leaving ``G_s``);
    other topologies: the sum over the path's channels.  ``backlog`` readings: the flits
    waiting in the channel's router for that output (input buffers and output queue) plus the
    downstream occupancy; ``credits-hops``: the downstream occupancy (credits) only."""
    (T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase, onpath_t, group, adj, exit_port,
     vc_inc, num_vcs) = pk_args
    h = walk_c(src, dst, c, inter, T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase,
               onpath_t, group, adj, exit_port, vc_inc, num_vcs, tmp_sw, tmp_po, tmp_vc)
    q = 0
    for k in range(h):
        x = tmp_sw[k]
        j = tmp_po[k]
        if df_global and not is_global[x, j]:
            continue
        if gread == GREAD_CREDITS_HOPS:   # downstream occupancy only (credits)
            r = 0
            for v in range(V):
                r += depth - credits[(x * R + j) * V + v]
        else:                             # + output queue + flits waiting for the output
            r = _occ_port(x, j, R, V, NP, depth, credits, oq_flits) + backlog[x * NP + j]
        q += r
        if df_global:
            break
    return q, h


@njit(cache=True)
def _ugal_local(u, dst, vm_now, cn, inter, prm, pk_args, R, V, NP, credits, oq_flits, tmp_sw,
                tmp_po, tmp_vc):
    """UGAL-L at ``u``: whether to go on minimally (class 0, next hop on VC ``vm_now``, or
    MIN's first VC when negative) rather than on class ``cn`` via ``inter``, by the rule in
    ``prm[P_RULE]`` over the local queues of the two first hops."""
    (T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase, onpath_t, group, adj, exit_port,
     vc_inc, num_vcs) = pk_args
    depth = prm[P_DEPTH]
    hm = walk_c(u, dst, 0, -1, T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase,
                onpath_t, group, adj, exit_port, vc_inc, num_vcs, tmp_sw, tmp_po, tmp_vc)
    jm, vm = tmp_po[0], tmp_vc[0]
    if vm_now >= 0:
        vm = vm_now
    hn = walk_c(u, dst, cn, inter, T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase,
                onpath_t, group, adj, exit_port, vc_inc, num_vcs, tmp_sw, tmp_po, tmp_vc)
    jn, vn = tmp_po[0], tmp_vc[0]
    rule = prm[P_RULE]
    if rule == RULE_YEBENES:
        qm = depth - credits[(u * R + jm) * V + vm]
        qn = depth - credits[(u * R + jn) * V + vn]
        return ugal_yebenes(qm, qn, prm[P_THRESHOLD])
    qm = _occ_port(u, jm, R, V, NP, depth, credits, oq_flits)
    qn = _occ_port(u, jn, R, V, NP, depth, credits, oq_flits)
    if rule == RULE_VCH:
        qmv = depth - credits[(u * R + jm) * V + vm]
        qnv = depth - credits[(u * R + jn) * V + vn]
        return ugal_kim_vch(qm, qn, qmv, qnv, hm, hn, jm == jn)
    return ugal_kim(qm, hm, qn, hn)


@njit(cache=True, inline="always")
def _route(u, pk, q, t, prm, pk_args, cls_nonmin, cls_inter, n_groups, bad3h, is_global,
           host_off, R, V, NP, credits, oq_flits, backlog,
           pk_dst, pk_dhost, pk_phase, pk_inter, pk_vc, pk_cls, pk_hops, q_rt, tmp,
           sdn_share, sdn_key):
    """Route computation for a packet that reached the head of input VC ``q`` of ``u``; at
    the source (class still undecided) first the source decision (class, intermediate).  The
    route (out port, out VC) is kept per input VC (``q_rt``): under wormhole the packet's
    head may be routed at the next switch while its tail still waits here.  ``ugal-sdn``
    (:data:`MODE_SDN`): non-minimal with probability ``sdn_share[u, sdn_key[dst]] /
    prm[P_SDN_SLOTS]``, the share a controller decided for (source, destination key).  PAR
    (``prm[P_REROUTE] >= 0``): a minimal packet heading on from its second switch, reached
    by a first hop that is not global, is decided again there (:func:`_ugal_local`) and may
    take the re-route class from ``u``."""
    (T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase, onpath_t, group, adj, exit_port,
     vc_inc, num_vcs) = pk_args
    tmp_sw, tmp_po, tmp_vc = tmp    # scratch for walks (an inlined function takes <= 30 args)
    n = adj.shape[0]
    dst = pk_dst[pk]
    if pk_cls[pk] < 0:
        mode = prm[P_MODE]
        c = 0
        inter = -1
        if mode == MODE_DST_HOST:
            c = (pk_dhost[pk] - host_off[dst]) * prm[P_LAYERS]
            if prm[P_LAYERS] > 1:       # LMC 0 draws nothing: the run's random stream stays
                c += np.random.randint(prm[P_LAYERS])
        elif mode != MODE_FIXED and dst != u:
            cn = 1
            inter = sample_inter(u, dst, cls_inter[cn], n, n_groups, group, adj,
                                 T[cls_t0[cn]], bad3h)
            depth = prm[P_DEPTH]
            if mode == MODE_SDN:
                take_min = np.random.randint(prm[P_SDN_SLOTS]) >= sdn_share[u, sdn_key[dst]]
            elif mode == MODE_UGAL_L:
                take_min = _ugal_local(u, dst, -1, cn, inter, prm, pk_args, R, V, NP, credits,
                                       oq_flits, tmp_sw, tmp_po, tmp_vc)
            else:
                gread = prm[P_GREAD]
                dfg = prm[P_DF_GLOBAL] != 0
                qm, hm = _path_reading(u, dst, 0, -1, pk_args, R, V, NP, depth, credits,
                                       oq_flits, backlog, is_global, dfg, gread, tmp_sw, tmp_po,
                                       tmp_vc)
                qn, hn = _path_reading(u, dst, cn, inter, pk_args, R, V, NP, depth, credits,
                                       oq_flits, backlog, is_global, dfg, gread, tmp_sw, tmp_po,
                                       tmp_vc)
                if gread == GREAD_BACKLOG:
                    take_min = ugal_kim(qm, 1, qn, 1)
                else:
                    take_min = ugal_kim(qm, hm, qn, hn)
            if not take_min:
                c = cn
            else:
                inter = -1
        elif cls_inter[0] != INTER_NONE and dst != u:
            inter = sample_inter(u, dst, cls_inter[0], n, n_groups, group, adj,
                                 T[cls_t0[0]], bad3h)
        ph, it, vc = start_c(u, dst, c, inter, cls_t0, cls_target0, cls_vcbase)
        if dst == u and cls_target0[c] != T0_DST:
            ph, it = 1, -1   # local delivery: no intermediate
        pk_cls[pk] = c
        pk_phase[pk] = ph
        pk_inter[pk] = it
        pk_vc[pk] = vc
    elif pk_cls[pk] == 0 and prm[P_REROUTE] >= 0 and pk_hops[pk] == 1 and dst != u and \
            prm[P_MODE] == MODE_UGAL_L and not is_global[u, (q // V) % NP]:
        rr = prm[P_REROUTE]
        inter = sample_inter(u, dst, cls_inter[rr], n, n_groups, group, adj, T[cls_t0[rr]],
                             bad3h)
        if not _ugal_local(u, dst, pk_vc[pk], rr, inter, prm, pk_args, R, V, NP, credits,
                           oq_flits, tmp_sw, tmp_po, tmp_vc):
            ph, it, vc = start_c(u, dst, rr, inter, cls_t0, cls_target0, cls_vcbase)
            pk_cls[pk] = rr
            pk_phase[pk] = ph
            pk_inter[pk] = it
            pk_vc[pk] = vc
    j, v, ph, nvc = step_c(u, dst, pk_phase[pk], pk_inter[pk], pk_vc[pk], pk_cls[pk], T, cls_t0,
                           cls_t1, cls_target0, cls_exit, onpath_t, group, adj, exit_port,
                           vc_inc, num_vcs)
    if j == NO_ROUTE:
        return False
    pk_phase[pk] = ph
    pk_vc[pk] = nvc
    if j != DELIVER:
        out, ovc = j, v
    else:   # per-packet VC allocation (BookSim): a packet ejects on the VC it travels on
        out, ovc = R + pk_dhost[pk] - host_off[u], v if prm[P_VCALLOC] else 0
    q_rt[q, 0] = out
    q_rt[q, 1] = ovc
    backlog[u * NP + out] += prm[P_SIZE]
    return True


@njit(cache=True, inline="always")
def _rr_offer(best, dist, touched, n, x, cand, d):
    """Round-robin arbitration by offers (iSLIP's grants, VC allocation): candidate ``cand``
    at distance ``d`` after ``x``'s pointer becomes ``best[x]`` when it is nearer than the
    best so far (``best[x] < 0``: none yet; ``x`` is then listed in ``touched``).  Returns
    the number listed."""
    if best[x] < 0:
        touched[n] = x
        n += 1
    elif d >= dist[x]:
        return n
    best[x] = cand
    dist[x] = d
    return n


@njit(cache=True, inline="always")
def _flits_due(t, st, head, tail, ring_time, ring_idx, in_arr):
    """Wormhole: count the flits of a ring (in time order) that have reached their input
    buffer by cycle ``t`` into ``in_arr``."""
    n = ring_time.shape[0]
    icap = in_arr.shape[1]
    h0 = st[head]
    while h0 < st[tail] and ring_time[h0 % n] <= t:
        x = ring_idx[h0 % n]
        in_arr[x // icap, x % icap] += 1
        h0 += 1
    st[head] = h0


@njit(cache=True, inline="always")
def _flit_sent(st, head, tail, ring_time, ring_idx, when, x):
    """Wormhole: a flit reaches input-buffer slot ``x`` at cycle ``when`` (rings hold one
    constant delay each, so they stay in time order); False when the ring is full."""
    n = ring_time.shape[0]
    k = st[tail]
    if k - st[head] >= n:
        return False
    ring_time[k % n] = when
    ring_idx[k % n] = x
    st[tail] = k + 1
    return True


@njit(cache=True)
def run_cycles(t, t_end, drain, prate, prm, st, pk_args, cls_nonmin, cls_inter, n_groups, bad3h,
               is_global, host_off, host_sw, peer, tr_lo, tr_hi,
               pk_dst, pk_dhost, pk_phase, pk_inter, pk_vc, pk_cls, pk_ready,
               pk_gen, pk_inj, pk_hops, pk_label, free_list,
               in_q, in_head, in_cnt, in_rr, in_busy, credits, oq, oq_head, oq_cnt, oq_flits,
               out_busy, out_xbar, out_rr, acc_rr, backlog, ce_time, ce_idx, ce_amt,
               sq, sq_head, sq_cnt, inj_busy, sw_cnt, link_flits, lat_hist,
               q_rt, oq_fl, oq_vc, in_arr, in_sent, ovc_own, fe_time, fe_idx,
               ie_time, ie_idx, inj_pk, inj_fl, inj_cred, sdn_share, sdn_key, link_wait,
               crt_d, pk_sent, hp_time, hp_idx, hp_amt, hp_rt, va_t, va_rr):
    """Run cycles ``t .. t_end - 1`` (or, with ``drain``, until every labelled packet has
    left).  Returns ``(status, t)``; the state arrays are updated in place.

    Port counters: ``link_flits[u * R + j]`` flits sent on network port ``j`` of ``u`` (all
    cycles); under ``ugal-sdn`` also ``link_wait``, the cycles the port sent nothing while a
    ready packet for it waited for credits or its output VC (InfiniBand's PortXmitWait: the
    backpressure a lossless fabric shows instead of drops).

    Wormhole state (unused under VCT): ``in_arr[q, k]`` flits of entry ``k`` of input VC ``q``
    arrived, ``in_sent[q]`` flits of its head entry switched, ``ovc_own`` the packet holding
    an output VC, ``fe_*`` / ``ie_*`` the flits under way on router and injection channels
    (rings in time order: each has one constant delay), ``inj_pk`` / ``inj_fl`` the packet a
    host is injecting and its flits sent, ``inj_cred`` the injection buffer's free flits.

    UGAL-L_CR state (``prm[P_CR]``): ``crt_d[u * R + j]`` the latest ``t_d`` of output ``j``
    of ``u``; ``pk_sent`` the cycle a packet took its current output's credits (crossed the
    crossbar: Kim's Fig. 17 stamps a flit when the credit count is decremented, so a round
    trip includes the wait in the output queue, which is where a congested global channel
    holds its packets); every credit goes through the heap ``hp_*`` (due time, counter,
    amount, the round trip it completes).

    Per-packet VC allocation (``prm[P_VCALLOC]``, BookSim's ``iq`` router, VCT): a ready
    head first acquires its output VC (network or ejection) in a VC-allocation step of its
    own cycle (``va_t[q]``, the cycle; round-robin per output VC, ``va_rr``), holds it
    (``ovc_own``) until it has crossed the crossbar, and may request the switch from the next
    cycle on; a released VC is allocated again from the next cycle.  Hosts inject into
    ``V`` VCs, a random one with room per packet."""
    (T, cls_t0, cls_t1, cls_target0, cls_exit, cls_vcbase, onpath_t, group, adj, exit_port,
     vc_inc, num_vcs) = pk_args
    N, R = adj.shape
    V = num_vcs
    H = host_sw.shape[0]
    NP = in_busy.shape[0] // N
    S = prm[P_SPEEDUP]           # S / Sd allocation rounds per cycle (2.5 = 5 / 2)
    Sd = prm[P_SPEEDUP_DEN]
    size = prm[P_SIZE]
    depth = prm[P_DEPTH]
    inj_cap = prm[P_INJ_CAP]
    oqcap = prm[P_OQ_FLITS]
    ocap = oq.shape[1]
    icap = in_q.shape[1]
    rdelay = prm[P_ROUTER_DELAY]
    clat = prm[P_CHAN_LAT]
    tlat = prm[P_TERM_LAT]
    crlat = prm[P_CREDIT_LAT]
    ms, me = prm[P_MEAS_START], prm[P_MEAS_END]
    wh = prm[P_FC] == FC_WORMHOLE
    vca = prm[P_VCALLOC] != 0
    va_q = np.full(NP * V, -1, np.int64)     # VC allocation: the winning input VC so far,
    va_d = np.empty(NP * V, np.int64)        # its distance from the pointer, per output VC
    va_list = np.empty(NP * V, np.int64)
    occ = 1 if wh else size    # flits one crossbar or channel move carries
    sq_cap = sq.shape[1]
    CE = ce_time.shape[0]
    LH = lat_hist.shape[0]
    req_v = np.empty(NP, np.int64)
    req_o = np.empty(NP, np.int64)
    best_i = np.empty(NP, np.int64)
    best_d = np.empty(NP, np.int64)
    islip = prm[P_ALLOC] == ALLOC_ISLIP
    iters = prm[P_ITERS]
    # iSLIP: req_vc[i, o] the VC of input i that requests output o (-1: none)
    req_vc = np.full((NP, NP), -1, np.int64)
    req_list = np.empty((NP, NP), np.int64)
    req_n = np.zeros(NP, np.int64)
    grant = np.full(NP, -1, np.int64)
    act = np.empty(NP, np.int64)
    sdn = prm[P_MODE] == MODE_SDN
    blocked = np.full(NP, -1, np.int64)   # ugal-sdn: t * N + u when an output lacked credits
    tmp_sw = np.empty(4 * N + 5, np.int64)
    tmp_po = np.empty(4 * N + 4, np.int64)
    tmp_vc = np.empty(4 * N + 4, np.int64)
    tmp = (tmp_sw, tmp_po, tmp_vc)
    cr = prm[P_CR] != 0
    crt0 = clat + rdelay + crlat      # a credit's round trip through idle routers
    in_flight = 0    # packets (VCT) or flits (wormhole) in the routers
    for u in range(N):
        in_flight += sw_cnt[u]
    while t < t_end:
        if drain and st[S_LAB_DEL] + st[S_LAB_OVERFLOW] >= st[S_LAB_GEN]:
            break
        # -- credits and (wormhole) flits due ----------------------------------------------------
        h0 = st[S_CE_HEAD]
        while h0 < st[S_CE_TAIL] and ce_time[h0 % CE] <= t:
            credits[ce_idx[h0 % CE]] += ce_amt[h0 % CE]
            h0 += 1
        st[S_CE_HEAD] = h0
        if cr:
            n_hp = st[S_HP_N]
            while n_hp > 0 and hp_time[0] <= t:
                credits[hp_idx[0]] += hp_amt[0]
                crt_d[hp_idx[0] // V] = max(hp_rt[0] - crt0, 0)
                n_hp = hp_pop(hp_time, hp_idx, hp_amt, hp_rt, n_hp)
            st[S_HP_N] = n_hp
        if wh:
            _flits_due(t, st, S_FE_HEAD, S_FE_TAIL, fe_time, fe_idx, in_arr)
            _flits_due(t, st, S_IE_HEAD, S_IE_TAIL, ie_time, ie_idx, in_arr)
        # -- generation and injection ------------------------------------------------------------
        measuring = ms <= t < me
        for h in range(H):
            if np.random.random() < prate:
                if measuring:
                    st[S_WIN_GEN_FLITS] += size
                    st[S_LAB_GEN] += 1
                if sq_cnt[h] < sq_cap:
                    sq[h, (sq_head[h] + sq_cnt[h]) % sq_cap] = t
                    sq_cnt[h] += 1
                else:
                    st[S_OVERFLOW] += 1
                    if measuring:
                        st[S_LAB_OVERFLOW] += 1
            u = host_sw[h]
            q = (u * NP + R + (h - host_off[u])) * V
            if wh:
                start = inj_pk[h] < 0 and inj_cred[h] > 0 and in_cnt[q] < icap
            else:
                start = inj_busy[h] <= t and in_cnt[q] < inj_cap
                if vca and sq_cnt[h] > 0 and inj_busy[h] <= t:  # a random VC with room
                    v0 = np.random.randint(V)
                    for k in range(V):
                        if in_cnt[q + (v0 + k) % V] < inj_cap:
                            q += (v0 + k) % V
                            start = True
                            break
            if sq_cnt[h] > 0 and start:
                top = st[S_FREE_TOP]
                if top == 0:
                    return ST_POOL, t
                pk = free_list[top - 1]
                st[S_FREE_TOP] = top - 1
                g = sq[h, sq_head[h]]
                sq_head[h] = (sq_head[h] + 1) % sq_cap
                sq_cnt[h] -= 1
                lo, hi = tr_lo[h], tr_hi[h]
                if hi - lo == 1:
                    d = lo
                else:
                    d = lo + np.random.randint(hi - lo - (1 if lo <= h < hi else 0))
                    if lo <= h < hi and d >= h:
                        d += 1
                pk_dhost[pk] = d
                pk_dst[pk] = host_sw[d]
                pk_cls[pk] = -1
                pk_gen[pk] = g
                pk_inj[pk] = t
                pk_hops[pk] = 0
                pk_label[pk] = ms <= g < me
                pk_ready[pk] = t + tlat + rdelay
                k = (in_head[q] + in_cnt[q]) % icap
                in_q[q, k] = pk
                in_cnt[q] += 1
                if wh:
                    in_arr[q, k] = 0
                    inj_pk[h] = pk
                    inj_fl[h] = 0
                else:
                    inj_busy[h] = t + size
                    sw_cnt[u] += 1
                    in_flight += 1
                if in_cnt[q] == 1:
                    if not _route(u, pk, q, t, prm, pk_args, cls_nonmin, cls_inter, n_groups,
                                  bad3h, is_global, host_off, R, V, NP, credits, oq_flits,
                                  backlog, pk_dst, pk_dhost, pk_phase, pk_inter, pk_vc,
                                  pk_cls, pk_hops, q_rt, tmp, sdn_share, sdn_key):
                        st[S_ERR_U] = u
                        st[S_ERR_PK] = pk
                        return ST_NO_ROUTE, t
            if wh and inj_pk[h] >= 0 and inj_cred[h] > 0:
                # the packet being injected is the last entry of the injection VC
                if not _flit_sent(st, S_IE_HEAD, S_IE_TAIL, ie_time, ie_idx, t + tlat + rdelay,
                                  q * icap + (in_head[q] + in_cnt[q] - 1) % icap):
                    return ST_POOL, t
                inj_cred[h] -= 1
                inj_fl[h] += 1
                sw_cnt[u] += 1
                in_flight += 1
                if inj_fl[h] == size:
                    inj_pk[h] = -1
        # -- routers -------------------------------------------------------------------------
        for u in range(N):
            if sw_cnt[u] == 0:
                continue
            st[S_ROUTER_CYCLES] += 1
            nh = host_off[u + 1] - host_off[u]
            if vca:     # VC allocation: every free output VC takes the ready head that
                # requests it nearest after its round-robin pointer (a head requests one VC)
                n_va = 0
                for i in range(NP):
                    if (adj[u, i] < 0) if i < R else (i - R >= nh):
                        continue
                    for v in range(V):
                        q = (u * NP + i) * V + v
                        if in_cnt[q] == 0 or va_t[q] >= 0 or pk_ready[in_q[q, in_head[q]]] > t:
                            continue
                        x = q_rt[q, 0] * V + q_rt[q, 1]
                        if ovc_own[u * NP * V + x] >= 0:
                            continue
                        n_va = _rr_offer(va_q, va_d, va_list, n_va, x, q,
                                         (i * V + v - va_rr[u * NP * V + x]) % (NP * V))
                for k in range(n_va):
                    x = va_list[k]
                    q = va_q[x]
                    ovc_own[u * NP * V + x] = in_q[q, in_head[q]]
                    va_t[q] = t
                    va_rr[u * NP * V + x] = (q - u * NP * V + 1) % (NP * V)
                    va_q[x] = -1
            s0 = (t * S) // Sd          # crossbar slots are numbered on across cycles
            for it in range(((t + 1) * S) // Sd - s0):
                slot = s0 + it
                # input stage: every input port picks one ready VC head (round-robin)
                anyreq = False
                for i in range(NP):
                    req_v[i] = -1
                    best_i[i] = -1
                    req_n[i] = 0
                    if i < R:
                        if adj[u, i] < 0:
                            continue
                        nv = V
                    else:
                        if i - R >= nh:
                            continue
                        nv = V if vca else 1
                    pi = u * NP + i
                    if in_busy[pi] > slot:
                        continue
                    for k in range(nv):
                        v = (in_rr[pi] + k) % nv
                        q = pi * V + v
                        if in_cnt[q] == 0:
                            continue
                        if wh:   # a flit of the head entry is here and not yet switched
                            if in_arr[q, in_head[q]] <= in_sent[q]:
                                continue
                        elif pk_ready[in_q[q, in_head[q]]] > t or vca and not 0 <= va_t[q] < t:
                            continue
                        o = q_rt[q, 0]
                        oi = u * NP + o
                        if out_xbar[oi] > slot or oq_flits[oi] + occ > oqcap:
                            continue
                        if o < R and credits[(u * R + o) * V + q_rt[q, 1]] < occ or \
                                wh and in_sent[q] == 0 and ovc_own[oi * V + q_rt[q, 1]] >= 0:
                            # no credits, or (wormhole) a head flit waits for its output VC
                            if sdn:
                                blocked[o] = t * N + u
                            continue
                        anyreq = True
                        if islip:   # every output the input has a ready head for
                            if req_vc[i, o] < 0:
                                req_vc[i, o] = v
                                req_list[i, req_n[i]] = o
                                req_n[i] += 1
                            continue
                        req_v[i] = v
                        req_o[i] = o
                        break
                if not anyreq:
                    break
                if islip:
                    # iSLIP (McKeown): request-grant-accept, round-robin grant pointers per
                    # output and accept pointers per input, moved only by a match of the
                    # first iteration; ``iters`` iterations over the unmatched ports
                    # (each step walks the requests, not all NP x NP port pairs: a grant is
                    # the requester nearest after the output's pointer, an accept the
                    # granting output nearest after the input's; ``grant`` is -1 between)
                    for itr in range(iters):
                        n_act = 0
                        for i in range(NP):
                            if req_n[i] == 0 or req_v[i] >= 0:
                                continue
                            for k in range(req_n[i]):
                                o = req_list[i, k]
                                if best_i[o] >= 0:
                                    continue
                                n_act = _rr_offer(grant, best_d, act, n_act, o, i,
                                                  (i - out_rr[u * NP + o]) % NP)
                        progress = False
                        for i in range(NP):
                            if req_n[i] == 0 or req_v[i] >= 0:
                                continue
                            pi = u * NP + i
                            bo, bd = -1, NP
                            for k in range(req_n[i]):
                                o = req_list[i, k]
                                if grant[o] == i and (o - acc_rr[pi]) % NP < bd:
                                    bo, bd = o, (o - acc_rr[pi]) % NP
                            if bo >= 0:
                                best_i[bo] = i
                                req_v[i] = req_vc[i, bo]
                                req_o[i] = bo
                                progress = True
                                if itr == 0:
                                    acc_rr[pi] = (bo + 1) % NP
                                    out_rr[u * NP + bo] = (i + 1) % NP
                        for k in range(n_act):
                            grant[act[k]] = -1
                        if not progress:
                            break
                    for i in range(NP):
                        for k in range(req_n[i]):
                            req_vc[i, req_list[i, k]] = -1
                else:
                    # output stage: every output grants one requesting input (round-robin)
                    for i in range(NP):
                        if req_v[i] < 0:
                            continue
                        o = req_o[i]
                        dd = (i - out_rr[u * NP + o]) % NP
                        if best_i[o] < 0 or dd < best_d[o]:
                            best_i[o] = i
                            best_d[o] = dd
                for o in range(NP):
                    i = best_i[o]
                    if i < 0:
                        continue
                    v = req_v[i]
                    pi = u * NP + i
                    q = pi * V + v
                    pk = in_q[q, in_head[q]]
                    ovc = q_rt[q, 1]
                    in_rr[pi] = (v + 1) % (V if i < R or vca else 1)
                    in_busy[pi] = slot + occ
                    oi = u * NP + o
                    if not islip:
                        out_rr[oi] = (i + 1) % NP
                    out_xbar[oi] = slot + occ
                    backlog[oi] -= occ
                    if o < R:
                        credits[(u * R + o) * V + ovc] -= occ
                    k = (oq_head[oi] + oq_cnt[oi]) % ocap
                    oq[oi, k] = pk
                    oq_vc[oi, k] = ovc
                    oq_fl[oi, k] = in_sent[q] if wh else 0
                    oq_cnt[oi] += 1
                    oq_flits[oi] += occ
                    if i < R and cr:   # UGAL-L_CR: delayed by this output's excess t_d
                        delay = 0
                        if o < R and not is_global[u, i]:
                            lo_d = crt_d[u * R + o]
                            for o2 in range(R):
                                if adj[u, o2] >= 0 and crt_d[u * R + o2] < lo_d:
                                    lo_d = crt_d[u * R + o2]
                            delay = crt_d[u * R + o] - lo_d
                        due = t + crlat + delay
                        st[S_HP_N] = hp_push(hp_time, hp_idx, hp_amt, hp_rt, st[S_HP_N], due,
                                              (adj[u, i] * R + peer[u, i]) * V + v, occ,
                                              due - pk_sent[pk])
                        if st[S_HP_N] < 0:
                            return ST_POOL, t
                    elif i < R:  # return the credits upstream
                        tail = st[S_CE_TAIL]
                        if tail - st[S_CE_HEAD] >= CE:
                            return ST_POOL, t
                        ce_time[tail % CE] = t + crlat
                        ce_idx[tail % CE] = (adj[u, i] * R + peer[u, i]) * V + v
                        ce_amt[tail % CE] = occ
                        st[S_CE_TAIL] = tail + 1
                    elif wh:
                        inj_cred[host_off[u] + i - R] += 1
                    if cr:
                        pk_sent[pk] = t
                    if vca:     # the packet has crossed: its output VC is free next cycle
                        ovc_own[oi * V + ovc] = -1
                        va_t[q] = -1
                    st[S_LAST_MOVE] = t
                    if wh:   # the output VC is the packet's from its head to its tail flit
                        in_sent[q] += 1
                        if in_sent[q] < size:
                            ovc_own[oi * V + ovc] = pk
                            continue
                        ovc_own[oi * V + ovc] = -1
                        in_sent[q] = 0
                    in_head[q] = (in_head[q] + 1) % icap
                    in_cnt[q] -= 1
                    if in_cnt[q] > 0:
                        nxt = in_q[q, in_head[q]]
                        if not _route(u, nxt, q, t, prm, pk_args, cls_nonmin, cls_inter, n_groups,
                                      bad3h, is_global, host_off, R, V, NP, credits, oq_flits,
                                      backlog, pk_dst, pk_dhost, pk_phase, pk_inter, pk_vc,
                                      pk_cls, pk_hops, q_rt, tmp, sdn_share, sdn_key):
                            st[S_ERR_U] = u
                            st[S_ERR_PK] = nxt
                            return ST_NO_ROUTE, t
            # channel stage: every output queue feeds its channel, one flit per cycle
            for o in range(R + nh):
                oi = u * NP + o
                if oq_cnt[oi] == 0 or out_busy[oi] > t:
                    if sdn and o < R and out_busy[oi] <= t and blocked[o] == t * N + u:
                        link_wait[u * R + o] += 1   # idle (queue empty) while blocked
                    continue
                pk = oq[oi, oq_head[oi]]
                ovc = oq_vc[oi, oq_head[oi]]
                fl = oq_fl[oi, oq_head[oi]]
                oq_head[oi] = (oq_head[oi] + 1) % ocap
                oq_cnt[oi] -= 1
                oq_flits[oi] -= occ
                out_busy[oi] = t + occ
                st[S_LAST_MOVE] = t
                sw_cnt[u] -= 1
                if o < R:
                    w = adj[u, o]
                    q = (w * NP + peer[u, o]) * V + ovc
                    sw_cnt[w] += 1
                    st[S_FLIT_HOPS] += occ
                    link_flits[u * R + o] += occ
                    if fl == 0:   # a head: a new entry of the downstream input VC
                        k = (in_head[q] + in_cnt[q]) % icap
                        in_q[q, k] = pk
                        in_arr[q, k] = 0
                        in_cnt[q] += 1
                        pk_ready[pk] = t + clat + rdelay
                        pk_hops[pk] += 1
                        if in_cnt[q] == 1:
                            if not _route(w, pk, q, t, prm, pk_args, cls_nonmin, cls_inter,
                                          n_groups, bad3h, is_global, host_off, R, V, NP,
                                          credits, oq_flits, backlog, pk_dst, pk_dhost,
                                          pk_phase, pk_inter, pk_vc, pk_cls, pk_hops,
                                          q_rt, tmp, sdn_share, sdn_key):
                                st[S_ERR_U] = w
                                st[S_ERR_PK] = pk
                                return ST_NO_ROUTE, t
                    # wormhole: the flit's packet is the last entry of that VC (it holds it)
                    if wh and not _flit_sent(st, S_FE_HEAD, S_FE_TAIL, fe_time, fe_idx,
                                             t + clat + rdelay,
                                             q * icap + (in_head[q] + in_cnt[q] - 1) % icap):
                        return ST_POOL, t
                else:
                    in_flight -= 1
                    if measuring:
                        st[S_WIN_EJ_FLITS] += occ
                    if wh and fl < size - 1:
                        continue
                    done = t + tlat + (0 if wh else size - 1)   # the tail's delivery
                    lat = done - pk_gen[pk]
                    st[S_ALL_DEL] += 1
                    st[S_ALL_LAT] += lat
                    if pk_label[pk]:
                        st[S_LAB_DEL] += 1
                        st[S_LAB_LAT] += lat
                        st[S_LAB_NETLAT] += done - pk_inj[pk]
                        st[S_LAB_HOPS] += pk_hops[pk]
                        if pk_cls[pk] == prm[P_REROUTE]:
                            st[S_LAB_REROUTED] += 1
                        if cls_nonmin[pk_cls[pk]]:
                            st[S_LAB_NONMIN] += 1
                            st[S_LAB_NM_LAT] += lat
                        else:
                            st[S_LAB_MIN_CNT] += 1
                            st[S_LAB_MIN_LAT] += lat
                        if lat > st[S_LAB_LAT_MAX]:
                            st[S_LAB_LAT_MAX] = lat
                        lat_hist[min(lat, LH - 1)] += 1
                    free_list[st[S_FREE_TOP]] = pk
                    st[S_FREE_TOP] += 1
        # -- deadlock: packets in the routers and none moved for a bounded time ------------------
        if in_flight > 0 and t - st[S_LAST_MOVE] > prm[P_DEADLOCK]:
            return ST_DEADLOCK, t
        if in_flight == 0:
            st[S_LAST_MOVE] = t
        t += 1
    return ST_OK, t


@njit(cache=True)
def seed_rng(seed):
    np.random.seed(seed)
