"""One simulation run: :func:`simulate` (pure: the result depends only on its arguments and is
JSON-serialisable) and :func:`tables_for` (simulator routing names -> fabroute tables).

Method (Kim et al. §4.2, Yébenes et al. §V): warm up in periods of ``warmup_cycles`` until the
mean latency of two consecutive periods agrees within ``warmup_tol`` (at most
``warmup_max_periods``); label the packets generated during ``measure_cycles``; keep injecting
and run until every labelled packet has left (at most ``drain_limit`` cycles).
"""

from __future__ import annotations

import math

import numpy as np

from simulator import engine as E
from simulator.config import ROUTINGS, SimConfig
from simulator.traffic import pattern
from tablegen.routing.imported import IMPORTED


#: cycles per call into the compiled engine: between calls Python runs its signal handlers,
#: so Ctrl-C and SIGTERM end a long point within a fraction of a second (compiled code does
#: not look at signals); a call costs ~10 µs of set-up, nothing next to 2,000 cycles
CHUNK_CYCLES = 2_000


def compile_pending() -> bool:
    """True when the engine's compiled code is not in Numba's cache (first run, or the
    sources changed since): the first point will spend ~40 s compiling.  Reads Numba's cache
    index the way Numba does (its source stamp); when that cannot be read, True."""
    try:
        return not E.run_cycles._cache._cache_file._load_index()
    except Exception:       # a Numba without this layout: say it may compile
        return True


def tables_for(topo, routing: str, vcs: int | None = None):
    """``(TableSet, config overrides)`` for a simulator routing name (:data:`ROUTINGS`)."""
    from tablegen.routing.build import build_tables

    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r} is unknown; expected one of {', '.join(ROUTINGS)}")
    r, nonmin, config = ROUTINGS[routing]
    return build_tables(topo, r, nonmin=nonmin, vcs=vcs), dict(config)


class _State:
    """Structure-of-arrays state of one run."""

    def __init__(self, ts, cfg: SimConfig, pk: E.Packed, prm: np.ndarray):
        topo = ts.topo
        N, R = topo.adj.shape
        V = pk.num_vcs
        NP = R + int(topo.hosts.max())
        H = topo.n_hosts
        size = cfg.packet_size
        n_in = N * NP * V
        if cfg.flow_control == "wormhole":
            # queue entries are packets with at least one flit here or under way, plus at
            # most one whose flits have all moved on while its tail is still upstream
            icap = max(cfg.buffer_depth, cfg.inj_buffer) + 1
            ocap = cfg.out_buffer
            pool = N * R * V * (cfg.buffer_depth + 1) + H * (cfg.inj_buffer + 1) \
                + N * NP * ocap + 16
        else:
            icap = max(cfg.buffer_depth, cfg.inj_buffer) // size
            ocap = cfg.out_buffer // size
            pool = N * R * V * (cfg.buffer_depth // size) + H * (cfg.inj_buffer // size) \
                + N * NP * ocap + 16
        self.pk_dst = np.zeros(pool, np.int64)
        self.pk_dhost = np.zeros(pool, np.int64)
        self.pk_phase = np.zeros(pool, np.int64)
        self.pk_inter = np.zeros(pool, np.int64)
        self.pk_vc = np.zeros(pool, np.int64)
        self.pk_cls = np.zeros(pool, np.int64)
        self.pk_ready = np.zeros(pool, np.int64)
        self.pk_gen = np.zeros(pool, np.int64)
        self.pk_inj = np.zeros(pool, np.int64)
        self.pk_hops = np.zeros(pool, np.int64)
        self.pk_label = np.zeros(pool, np.bool_)
        self.free_list = np.arange(pool, dtype=np.int64)[::-1].copy()
        self.in_q = np.zeros((n_in, icap), np.int32)
        self.in_head = np.zeros(n_in, np.int64)
        self.in_cnt = np.zeros(n_in, np.int64)
        self.in_rr = np.zeros(N * NP, np.int64)
        self.in_busy = np.zeros(N * NP, np.int64)
        self.credits = np.full(N * R * V, cfg.buffer_depth, np.int64)
        self.oq = np.zeros((N * NP, ocap), np.int32)
        self.oq_head = np.zeros(N * NP, np.int64)
        self.oq_cnt = np.zeros(N * NP, np.int64)
        self.oq_flits = np.zeros(N * NP, np.int64)
        self.out_busy = np.zeros(N * NP, np.int64)
        self.out_xbar = np.zeros(N * NP, np.int64)
        self.out_rr = np.zeros(N * NP, np.int64)
        self.acc_rr = np.zeros(N * NP, np.int64)
        self.backlog = np.zeros(N * NP, np.int64)
        ce = N * NP * math.ceil(cfg.speedup) * (cfg.credit_lat + 2) + 16
        self.ce_time = np.zeros(ce, np.int64)
        self.ce_idx = np.zeros(ce, np.int64)
        self.ce_amt = np.zeros(ce, np.int64)
        self.sq = np.zeros((H, cfg.source_queue_cap), np.int64)
        self.sq_head = np.zeros(H, np.int64)
        self.sq_cnt = np.zeros(H, np.int64)
        self.inj_busy = np.zeros(H, np.int64)
        self.sw_cnt = np.zeros(N, np.int64)
        self.link_flits = np.zeros(N * R, np.int64)    # flits sent per network port
        self.link_wait = np.zeros(N * R, np.int64)     # ugal-sdn: cycles blocked (sdn.py)
        self.sdn_share = np.zeros((1, 1), np.int64)    # ugal-sdn: set by sdn.SdnLoop
        self.sdn_key = np.zeros(1, np.int64)
        self.lat_hist = np.zeros(cfg.latency_hist_max, np.int64)
        # the route of each input VC's head entry; flit index and VC of output queue entries
        self.q_rt = np.zeros((n_in, 2), np.int64)
        self.oq_fl = np.zeros((N * NP, ocap), np.int32)
        self.oq_vc = np.zeros((N * NP, ocap), np.int32)
        # wormhole only (see engine.run_cycles)
        self.in_arr = np.zeros((n_in, icap), np.int32)
        self.in_sent = np.zeros(n_in, np.int64)
        self.ovc_own = np.full(N * NP * V, -1, np.int64)
        fe = N * R * (cfg.channel_latency + cfg.router_delay + 1) + 16
        self.fe_time = np.zeros(fe, np.int64)
        self.fe_idx = np.zeros(fe, np.int64)
        ie = H * (cfg.terminal_latency + cfg.router_delay + 1) + 16
        self.ie_time = np.zeros(ie, np.int64)
        self.ie_idx = np.zeros(ie, np.int64)
        self.inj_pk = np.full(H, -1, np.int64)
        self.inj_fl = np.zeros(H, np.int64)
        self.inj_cred = np.full(H, cfg.inj_buffer, np.int64)
        # UGAL-L_CR: every buffer slot of the network holds at most one credit under way
        hp = N * R * V * (cfg.buffer_depth // size) + 16 if cfg.ugal_cr else 1
        self.crt_d = np.zeros(N * R if cfg.ugal_cr else 1, np.int64)
        self.pk_sent = np.zeros(pool if cfg.ugal_cr else 1, np.int64)
        self.va_t = np.full(n_in if cfg.vc_allocation == "per-packet" else 1, -1, np.int64)
        self.va_rr = np.zeros(n_in if cfg.vc_allocation == "per-packet" else 1, np.int64)
        self.hp_time = np.zeros(hp, np.int64)
        self.hp_idx = np.zeros(hp, np.int64)
        self.hp_amt = np.zeros(hp, np.int64)
        self.hp_rt = np.zeros(hp, np.int64)
        self.st = np.zeros(E.S_NST, np.int64)
        self.st[E.S_FREE_TOP] = pool
        self.prm = prm
        self.pk = pk
        self.host_off = topo.host_offset.astype(np.int64)
        self.host_sw = np.repeat(np.arange(N), topo.hosts).astype(np.int64)
        gl = topo.kind_names.index("global") if "global" in topo.kind_names else -1
        self.is_global = topo.link_kind == gl
        self.pk_args = (pk.T, pk.cls_t0, pk.cls_t1, pk.cls_target0, pk.cls_exit, pk.cls_vcbase,
                        pk.onpath_t, pk.group, pk.adj, pk.exit_port, pk.vc_inc, pk.num_vcs)

    def run(self, t, t_end, drain, prate, lo, hi):
        """Cycles ``t .. t_end - 1`` (with ``drain``: until drained), as
        :func:`engine.run_cycles`, in calls of at most :data:`CHUNK_CYCLES` cycles; the
        state lives in the arrays, so the chunks run exactly the cycles one call would."""
        while True:
            stop = min(t_end, t + CHUNK_CYCLES)
            status, t2 = self._run(t, stop, drain, prate, lo, hi)
            if status != E.ST_OK or t2 < stop or stop == t_end:    # stopped, drained, done
                return status, t2
            t = t2

    def _run(self, t, t_end, drain, prate, lo, hi):
        s, p = self, self.pk
        return E.run_cycles(
            t, t_end, drain, prate, s.prm, s.st, s.pk_args, p.cls_nonmin, p.cls_inter,
            p.n_groups, p.bad3h, s.is_global, s.host_off, s.host_sw, p.peer, lo, hi,
            s.pk_dst, s.pk_dhost, s.pk_phase, s.pk_inter, s.pk_vc, s.pk_cls,
            s.pk_ready, s.pk_gen, s.pk_inj, s.pk_hops, s.pk_label, s.free_list,
            s.in_q, s.in_head, s.in_cnt, s.in_rr, s.in_busy, s.credits, s.oq, s.oq_head,
            s.oq_cnt, s.oq_flits, s.out_busy, s.out_xbar, s.out_rr, s.acc_rr, s.backlog, s.ce_time,
            s.ce_idx, s.ce_amt, s.sq, s.sq_head, s.sq_cnt, s.inj_busy, s.sw_cnt, s.link_flits,
            s.lat_hist, s.q_rt, s.oq_fl, s.oq_vc, s.in_arr, s.in_sent, s.ovc_own,
            s.fe_time, s.fe_idx, s.ie_time, s.ie_idx, s.inj_pk, s.inj_fl, s.inj_cred,
            s.sdn_share, s.sdn_key, s.link_wait, s.crt_d, s.pk_sent, s.hp_time, s.hp_idx,
            s.hp_amt, s.hp_rt, s.va_t, s.va_rr)


def _params(ts, cfg: SimConfig) -> np.ndarray:
    topo = ts.topo
    prm = np.zeros(E.P_NPRM, np.int64)
    prm[E.P_ROUTER_DELAY] = cfg.router_delay
    prm[E.P_CHAN_LAT] = cfg.channel_latency
    prm[E.P_TERM_LAT] = cfg.terminal_latency
    prm[E.P_CREDIT_LAT] = cfg.credit_lat
    prm[E.P_SIZE] = cfg.packet_size
    prm[E.P_DEPTH] = cfg.buffer_depth
    prm[E.P_INJ_CAP] = cfg.inj_buffer // cfg.packet_size
    prm[E.P_OQ_FLITS] = cfg.out_buffer
    prm[E.P_SPEEDUP], prm[E.P_SPEEDUP_DEN] = cfg.speedup_ratio
    prm[E.P_LAYERS] = 1
    if ts.routing == IMPORTED:
        prm[E.P_MODE] = E.MODE_DST_HOST
        prm[E.P_LAYERS] = 1 << int(ts.params["lmc"])
    elif len(ts.classes) == 1:
        prm[E.P_MODE] = E.MODE_FIXED
    else:
        prm[E.P_MODE] = {"local": E.MODE_UGAL_L, "global": E.MODE_UGAL_G,
                         "sdn": E.MODE_SDN}[cfg.ugal]
    rule = cfg.ugal_rule
    if rule == "auto":
        rule = ts.params.get("ugal_rule") or ("kim" if topo.kind == "dragonfly" else "yebenes")
    prm[E.P_RULE] = {"kim": E.RULE_KIM, "yebenes": E.RULE_YEBENES, "vch": E.RULE_VCH}[rule]
    thr = ts.params.get("ugal_threshold")
    prm[E.P_THRESHOLD] = cfg.threshold if cfg.ugal_threshold is not None or thr is None else thr
    prm[E.P_GREAD] = {"backlog-hops": E.GREAD_BACKLOG_HOPS, "backlog": E.GREAD_BACKLOG,
                      "credits-hops": E.GREAD_CREDITS_HOPS}[cfg.ugal_g_reading]
    prm[E.P_DEADLOCK] = cfg.deadlock_cycles
    prm[E.P_ALLOC] = {"rr": E.ALLOC_RR, "islip": E.ALLOC_ISLIP}[cfg.allocator]
    prm[E.P_ITERS] = cfg.islip_iterations
    prm[E.P_FC] = {"vct": E.FC_VCT, "wormhole": E.FC_WORMHOLE}[cfg.flow_control]
    prm[E.P_NGROUPS] = topo.n_groups
    prm[E.P_DF_GLOBAL] = int(topo.kind == "dragonfly")
    rr = ts.params.get("reroute")
    prm[E.P_REROUTE] = [c.name for c in ts.classes].index(rr) if rr else -1
    prm[E.P_CR] = int(cfg.ugal_cr)
    prm[E.P_VCALLOC] = int(cfg.vc_allocation == "per-packet")
    prm[E.P_MEAS_START] = 1 << 60
    prm[E.P_MEAS_END] = 1 << 60
    return prm


def routing_label(ts, cfg: SimConfig) -> str:
    if ts.routing == IMPORTED:
        return f"{IMPORTED}({ts.params.get('engine') or 'IB files'})"
    if len(ts.classes) == 1:
        return ts.classes[0].name
    if "reroute" in ts.params and cfg.ugal == "local":
        return f"par({ts.classes[1].name})"
    if cfg.ugal_cr:
        return f"ugal-l-cr({ts.classes[1].name})"
    if cfg.ugal == "global":
        return f"ugal-g({cfg.ugal_g_reading},{ts.classes[1].name})"
    if cfg.ugal == "sdn":
        return f"ugal-sdn({ts.classes[1].name})"
    return f"ugal-l({ts.classes[1].name})"


def simulate(ts, config: SimConfig | None = None, traffic: str = "uniform",
             load: float = 0.5, seed: int = 1) -> dict:
    """Simulate ``ts`` (a fabroute TableSet) under ``traffic`` at offered ``load`` (flits per
    cycle per host, 0 < load <= 1) and return the result as a JSON-serialisable dict.

    Keys: ``offered``, ``offered_measured``, ``accepted`` (flits delivered per cycle per host in
    the measurement window), ``latency_avg`` / ``latency_p50`` / ``latency_p99`` /
    ``latency_max`` (labelled packets, cycles from generation to the tail's delivery),
    ``network_latency_avg`` (from injection), ``latency_min_avg`` / ``latency_nonmin_avg``,
    ``hops_avg``, ``nonmin_share``, ``channel_util`` ({avg, max, by kind}), ``saturated``,
    ``drained``, ``deadlock`` (with the VC scheme), ``status``, ``cycles``, ``router_cycles``,
    ``flit_hops`` and the inputs (``config``, ``routing``, ``topology`` ...); ``ugal-sdn``
    adds ``sdn`` (:meth:`simulator.sdn.SdnLoop.result`: the mean decided share per poll).
    """
    cfg = config or SimConfig()
    if not 0 < load <= 1:
        raise ValueError(f"load={load}; expected 0 < load <= 1 (flits per cycle per host)")
    topo = ts.topo
    pk = E.Packed(ts)
    prm = _params(ts, cfg)
    lo, hi = pattern(topo, traffic, seed)
    st = _State(ts, cfg, pk, prm)
    loop = None
    if prm[E.P_MODE] == E.MODE_SDN:
        from simulator.sdn import SdnLoop

        loop = SdnLoop(ts, cfg, st)
    run = loop.run if loop else st.run
    E.seed_rng(int(seed))
    prate = float(load) / cfg.packet_size
    status, t = E.ST_OK, 0
    # -- warm-up until steady ------------------------------------------------------------------
    prev = None
    periods = 0
    while periods < cfg.warmup_max_periods:
        d0, l0 = st.st[E.S_ALL_DEL], st.st[E.S_ALL_LAT]
        status, t = run(t, t + cfg.warmup_cycles, False, prate, lo, hi)
        periods += 1
        if status != E.ST_OK:
            break
        dn = st.st[E.S_ALL_DEL] - d0
        mean = (st.st[E.S_ALL_LAT] - l0) / dn if dn else math.inf
        if prev is not None and math.isfinite(mean) and abs(mean - prev) <= cfg.warmup_tol * prev:
            break
        prev = mean
    warm = t
    # -- measurement window, then drain ----------------------------------------------------------
    drain = cfg.drain_limit
    win_flits = np.zeros_like(st.link_flits)
    if status == E.ST_OK:
        prm[E.P_MEAS_START], prm[E.P_MEAS_END] = t, t + cfg.measure_cycles
        q0 = int(st.sq_cnt.sum())
        f0 = st.link_flits.copy()
        status, t = run(t, t + cfg.measure_cycles, False, prate, lo, hi)
        win_flits = st.link_flits - f0
        grew = int(st.sq_cnt.sum()) - q0
        gen = st.st[E.S_WIN_GEN_FLITS]
        if gen and st.st[E.S_WIN_EJ_FLITS] < 0.9 * gen and grew > 0.05 * st.st[E.S_LAB_GEN]:
            # clearly saturated (source queues grow by > 5 % of the window's packets): the
            # labelled packets would not drain; do not spend the whole drain limit on them
            drain = min(drain, cfg.measure_cycles)
    if status == E.ST_OK:
        status, t = run(t, t + drain, True, prate, lo, hi)
    r = _result(ts, cfg, traffic, load, seed, st, status, t, warm, periods, win_flits)
    if loop:
        r["sdn"] = loop.result()
    return r


def _result(ts, cfg, traffic, load, seed, st, status, t, warm, periods, win_flits) -> dict:
    topo = ts.topo
    s = st.st
    H = topo.n_hosts
    M = cfg.measure_cycles
    lab, dl = int(s[E.S_LAB_GEN]), int(s[E.S_LAB_DEL])
    drained = status == E.ST_OK and dl == lab and s[E.S_LAB_OVERFLOW] == 0
    offered_m = s[E.S_WIN_GEN_FLITS] / (H * M)
    accepted = s[E.S_WIN_EJ_FLITS] / (H * M)
    hist = st.lat_hist
    cum = np.cumsum(hist)

    def pct(x):
        if not cum[-1]:
            return None
        return int(np.searchsorted(cum, x * cum[-1]))

    def avg(num, den):
        return float(num / den) if den else None

    R = topo.radix
    adj = topo.adj.ravel()
    used = adj >= 0
    util = win_flits / M
    kinds = topo.link_kind.ravel()
    by_kind = {topo.kind_names[k]: float(util[kinds == k].mean())
               for k in range(len(topo.kind_names)) if (kinds == k).any()}
    deadlock = None
    if status == E.ST_DEADLOCK:
        deadlock = {"cycle": int(t), "idle_cycles": cfg.deadlock_cycles,
                    "vc_scheme": ts.vc_scheme, "num_vcs": ts.num_vcs,
                    "packets_in_routers": int(st.sw_cnt.sum()),
                    "message": f"deadlock at cycle {t}: {int(st.sw_cnt.sum())} packets in the "
                               f"routers and none moved for {cfg.deadlock_cycles} cycles "
                               f"(VC scheme {ts.vc_scheme!r} with {ts.num_vcs} VCs)"}
    status_name = {E.ST_OK: "ok", E.ST_DEADLOCK: "deadlock", E.ST_NO_ROUTE: "no-route",
                   E.ST_POOL: "internal-overflow"}[status]
    if status == E.ST_NO_ROUTE:
        status_name += f" (switch {int(s[E.S_ERR_U])}, packet to switch " \
                       f"{int(st.pk_dst[s[E.S_ERR_PK]])})"
    saturated = bool(not drained or accepted < cfg.saturation_ratio * offered_m)
    return {
        "topology": topo.name(), "routing": routing_label(ts, cfg), "traffic": traffic,
        "load": float(load), "seed": int(seed), "hosts": H, "switches": topo.n_switches,
        "num_vcs": ts.num_vcs, "vc_scheme": ts.vc_scheme,
        "offered": float(load), "offered_measured": float(offered_m),
        "accepted": float(accepted),
        "latency_avg": avg(s[E.S_LAB_LAT], dl), "latency_p50": pct(0.5),
        "latency_p99": pct(0.99), "latency_max": int(s[E.S_LAB_LAT_MAX]) if dl else None,
        "network_latency_avg": avg(s[E.S_LAB_NETLAT], dl),
        "latency_min_avg": avg(s[E.S_LAB_MIN_LAT], s[E.S_LAB_MIN_CNT]),
        "latency_nonmin_avg": avg(s[E.S_LAB_NM_LAT], s[E.S_LAB_NONMIN]),
        "hops_avg": avg(s[E.S_LAB_HOPS], dl), "nonmin_share": avg(s[E.S_LAB_NONMIN], dl),
        "rerouted_share": avg(s[E.S_LAB_REROUTED], dl) if "reroute" in ts.params else None,
        "channel_util": {"avg": float(util[used].mean()) if used.any() else 0.0,
                         "max": float(util[used].max()) if used.any() else 0.0,
                         "by_kind": by_kind},
        "labelled": lab, "delivered": dl, "source_overflow": int(s[E.S_OVERFLOW]),
        "saturated": saturated, "drained": bool(drained), "deadlock": deadlock,
        "status": status_name, "cycles": int(t), "warmup_cycles": int(warm),
        "warmup_periods": int(periods), "router_cycles": int(s[E.S_ROUTER_CYCLES]),
        "flit_hops": int(s[E.S_FLIT_HOPS]), "config": cfg.to_dict(),
    }
