"""Adaptive UGAL-L from port counters: the congestion estimate, the non-minimal share per
(source switch, destination) and the split of flows into source-port slices — one
implementation for the OpenFlow controller (``controller/openflow/adaptive.py``) and the
simulator's ``ugal-sdn`` routing.

Why an estimate: OpenFlow 1.3 reports no queue depth, only cumulative port counters (bytes,
packets and drops sent per port).  :class:`PortEstimator` turns two polls of them into the
port's *offered load* ``rho = (bytes sent + bytes dropped) / (capacity x interval)``, smooths
it over polls (EWMA), and maps it to the mean occupancy of an M/M/1/B queue with the port's
buffer of ``B`` packets (:func:`mm1b_occupancy`): 0 for an idle port, ``rho / (1 - rho)`` at
moderate load, ``B / 2`` at saturation, ``B`` under heavy overload — plus, beyond
saturation, the ``B x (rho - 1)`` packets a lossless port would gather in one buffer's drain
time.  The map is monotone, so the decision sees the difference between 60 % and 95 % load,
between 100 % and 150 % and between 150 % and 600 %, which raw utilisation (capped at
100 %) cannot.

The decision (:class:`AdaptiveUgal`) is Kim et al.'s UGAL-L rule (ISCA 2008 §4.2,
:func:`tablegen.routing.ugal.ugal_kim`): minimal iff ``q_min * H_min <= q_nonmin * H_nonmin``,
made per (source switch, destination) — a destination switch, or a destination group on a
Dragonfly, whose minimal paths leave a switch on one port.  Packets of a flow cannot be
decided one by one on an OpenFlow switch, so the rule moves a *share* of the flows: the
``2**bits`` values of ``bits`` source-port bits are split into fixed blocks of sizes
``2**(bits-1), ..., 2, 1, 1`` (:func:`share_blocks`), any share ``m / 2**bits`` is a union of
blocks (:func:`blocks_of`), and a change of share re-points whole blocks between the two
verified classes.  The share moves in steps (an integral controller with a dead band):
toward non-minimal while the minimal candidate costs more than the non-minimal one by a
margin (by several slots when the difference is large), back by one slot a round while it
costs less by a margin — after a detour the minimal path looks emptier than it would be with
the flows back, and all sources see that in the same round.  The rule compares each
candidate's per-hop wait, occupancy + 1 (an M/M/1 queue's sojourn in service times), times
its hops; the margin is ``hysteresis`` times
the queueing part of the costs (so idle paths go minimal on hop counts alone), plus a
``floor`` for moves up.  A move against the previous one takes the margin times 2 per
reversal in a row (at most 4): a balance that lies between two steps ends resting on one
of them instead of alternating, while a trend (moves the same way) keeps the plain margin.
A source whose estimates have aged out (a switch that stopped answering) falls back to MIN
at once.

The non-minimal candidate is the mixture the source choice really makes: uniform over the
class's phase-0 targets (every other switch, or every other group), so its first-hop
occupancy ``q_nonmin`` is the weighted mean over the source's ports and ``H_nonmin`` the
mean hop count toward the destination (exact for VAL and VAL_3h, an upper bound for
VAL_nta whose paths may cut phase 0 short, exact up to the entry switch for group VAL).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tablegen.routing.ugal import ugal_kim
from tablegen.routing.walk import group_majority, table_lengths
from tablegen.tables import TableSet

__all__ = ["AdaptiveParams", "AdaptiveUgal", "PortEstimator", "blocks_of", "mm1b_occupancy",
           "share_blocks", "PARAM_RANGES"]


@dataclass(frozen=True)
class AdaptiveParams:
    """Knobs of the estimator and the decision (``docs/openflow.md``, *Adaptive UGAL-L*).

    Attributes:
        split_bits: shares move in steps of ``1 / 2**split_bits`` of a destination's flows.
        alpha: EWMA weight of the newest poll's offered load (1: no smoothing).
        buffer: packets a port's queue holds (the ``B`` of M/M/1/B).
        hysteresis: dead band: no move while the two costs differ by less than this share
            of their queueing part.
        floor: absolute margin (packets x hops) the minimal cost must exceed the non-minimal
            one by before a share moves up.
        gain: size of a move toward non-minimal: ``gain x |relative cost difference| x
            2**split_bits`` slots, at least 1; a move back is one slot.
        max_age: polls after which a silent switch's estimate expires (its sources take MIN).
        view: which queue a candidate has: ``first-hop`` (UGAL-L: the source's own output
            port) or ``path`` (the fullest port on the way — on the minimal path up to the
            destination or its group, on a Valiant path up to the end of phase 0: a
            controller sees every port, as UGAL-G's global knowledge).
    """

    split_bits: int = 3
    alpha: float = 0.5
    buffer: float = 32.0
    hysteresis: float = 0.25
    floor: float = 0.5
    gain: float = 1.0
    max_age: float = 3.0
    view: str = "first-hop"


#: a move against the last one takes the band times 2^reversals in a row, at most 2^MAX_WIDEN
MAX_WIDEN = 2

#: inclusive ranges of :class:`AdaptiveParams` (command-line and config checks)
PARAM_RANGES = {"split_bits": (1, 6), "alpha": (0.01, 1.0), "buffer": (1.0, 1e6),
                "hysteresis": (0.0, 10.0), "floor": (0.0, 1e6), "gain": (0.01, 10.0),
                "max_age": (1.0, 1000.0)}


# ---------------------------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------------------------
def mm1b_occupancy(rho, buffer: float) -> np.ndarray:
    """Mean number of packets in an M/M/1/B queue (``B = buffer``) at offered load ``rho``
    (any ``rho >= 0``; NaN stays NaN).  ``rho < 1``: ``rho/(1-rho) - (B+1) rho^(B+1) /
    (1 - rho^(B+1))``; ``rho = 1``: ``B/2``; ``rho > 1``: ``B - L(1/rho)`` (the free places of
    a queue at load ``rho`` behave as the packets of one at ``1/rho``).  Vectorised, O(1)."""
    rho = np.asarray(rho, dtype=np.float64)
    b = float(buffer)
    over = rho > 1.0
    r = np.where(over, 1.0 / np.maximum(rho, 1.0), rho)
    near = np.abs(1.0 - r) < 1e-9
    rs = np.where(near, 0.5, r)                       # keeps the formula finite where unused
    rb = rs ** (b + 1.0)
    low = rs / (1.0 - rs) - (b + 1.0) * rb / (1.0 - rb)
    low = np.where(near, b / 2.0, low)
    return np.where(over, b - low, low)


class PortEstimator:
    """Occupancy estimates of every (switch, network port) from cumulative counters.

    ``capacity[u, j]``: what port ``j`` of switch ``u`` can send per time unit (bytes per
    second for OpenFlow, flits per cycle for the simulator); ``0`` for a port that does not
    exist.  :meth:`update` takes one switch's counters at time ``t``; :meth:`occupancy` gives
    the estimate of every port (NaN where a switch never answered or its last answer is older
    than ``max_age`` polls).  A counter that went backwards (a switch that reconnected)
    restarts that port's series instead of producing a negative load."""

    def __init__(self, capacity: np.ndarray, params: AdaptiveParams, poll: float,
                 packet_bytes: float = 1.0):
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self.p = params
        self.poll = float(poll)
        self.packet_bytes = float(packet_bytes)
        n, r = self.capacity.shape
        self.rho = np.full((n, r), np.nan)
        self.last = np.full(n, -np.inf)               # time of each switch's last update
        self._prev: dict[int, tuple[float, np.ndarray]] = {}

    def update(self, u: int, t: float, tx_bytes, tx_packets, tx_dropped) -> None:
        """Counters of switch ``u``'s network ports (index ``j``) read at time ``t``."""
        now = np.stack([np.asarray(tx_bytes, np.float64), np.asarray(tx_packets, np.float64),
                        np.asarray(tx_dropped, np.float64)])
        prev = self._prev.get(u)
        self._prev[u] = (float(t), now)
        self.last[u] = float(t)
        if prev is None or t <= prev[0]:
            return
        d = now - prev[1]
        ok = (d >= 0).all(axis=0) & (self.capacity[u] > 0)
        size = np.where(d[1] > 0, d[0] / np.maximum(d[1], 1.0), self.packet_bytes)
        rho = (d[0] + d[2] * size) / (np.where(ok, self.capacity[u], 1.0) * (t - prev[0]))
        old = self.rho[u]
        a = self.p.alpha
        fresh = np.where(np.isnan(old), rho, a * rho + (1.0 - a) * old)
        self.rho[u] = np.where(ok, fresh, old)

    def occupancy(self, now: float) -> np.ndarray:
        """``float[N, R]`` estimated packets queued per port; NaN where unknown or expired.
        Beyond saturation a lossy port's queue stays at its buffer while the excess is
        dropped, so the estimate adds what a lossless port would have gathered in one
        buffer's drain time, ``B x (rho - 1)``: a port offered 6x its capacity must not look
        like one offered 1.5x (both have full queues; the first drops 83 % of what it gets)."""
        b = self.p.buffer
        q = mm1b_occupancy(self.rho, b) + b * np.maximum(self.rho - 1.0, 0.0)
        stale = now - self.last > self.p.max_age * self.poll
        q[stale] = np.nan
        return q


# ---------------------------------------------------------------------------------------------
# the split
# ---------------------------------------------------------------------------------------------
def share_blocks(bits: int) -> list[tuple[int, int]]:
    """The fixed blocks of the ``2**bits`` slot values, as ``(value, mask)`` over ``bits``
    bits: block ``i < bits`` holds the slots whose ``i`` highest bits are 1 and the next is
    0 (``2**(bits-1-i)`` slots), block ``bits`` the one slot of all ones.  Sizes
    ``2**(bits-1), ..., 2, 1, 1``: every share ``m / 2**bits`` is a union of blocks."""
    full = (1 << bits) - 1
    out = []
    for i in range(bits):
        mask = full & ~((1 << (bits - 1 - i)) - 1)       # the i + 1 highest bits
        value = full & ~((1 << (bits - i)) - 1)          # i ones, then a zero
        out.append((value, mask))
    out.append((full, full))
    return out


def block_sizes(bits: int) -> list[int]:
    return [1 << (bits - 1 - i) for i in range(bits)] + [1]


def blocks_of(m: int, bits: int) -> list[bool]:
    """Which blocks of :func:`share_blocks` go non-minimal for a share of ``m`` slots
    (``0 <= m <= 2**bits``): the binary digits of ``m``, or every block for ``2**bits``."""
    if not 0 <= m <= 1 << bits:
        raise ValueError(f"share {m}; expected 0..{1 << bits}")
    if m == 1 << bits:
        return [True] * (bits + 1)
    return [bool(m >> (bits - 1 - i) & 1) for i in range(bits)] + [False]


def share_of(nonmin: list[bool], bits: int) -> int | None:
    """The share whose :func:`blocks_of` is ``nonmin`` (``bits + 1`` flags), or ``None`` when
    no share gives that pattern (the one-slot last block without every other)."""
    if len(nonmin) != bits + 1:
        return None
    if all(nonmin):
        return 1 << bits
    if nonmin[bits]:
        return None
    return sum(1 << (bits - 1 - i) for i in range(bits) if nonmin[i])


# ---------------------------------------------------------------------------------------------
# the decision
# ---------------------------------------------------------------------------------------------
class AdaptiveUgal:
    """UGAL-L shares of a two-class table set (MIN first, then a Valiant class).

    ``keys``: ``switch`` (destination switches) or ``group`` (Dragonfly destination groups,
    when the non-minimal class heads for groups).  ``share[u, k]`` counts the slots of
    ``2**split_bits`` that go non-minimal; ``valid[u, k]`` is False for ``u``'s own switch or
    group (always minimal).  Construction: O(N^2 B / density) with B phase-0 targets per
    source — one sparse product — and O(N K) memory per array."""

    def __init__(self, ts: TableSet, params: AdaptiveParams):
        if len(ts.classes) != 2 or ts.classes[0].table0 is not None or \
                ts.classes[1].target0 not in ("switch", "group"):
            raise ValueError(f"{ts.routing}: adaptive decisions need MIN plus one Valiant "
                             "class (UGAL-L)")
        from scipy import sparse     # here: the split arithmetic above is imported at start-up

        self.ts, self.p = ts, params
        topo = ts.topo
        self.n = n = topo.n_switches
        self.slots = 1 << params.split_bits
        mn, nm = ts.classes
        self.keys = "group" if nm.target0 == "group" else "switch"
        grp = topo.group.astype(np.int64)
        K = topo.n_groups if self.keys == "group" else n
        self.key_of = grp if self.keys == "group" else np.arange(n)   # destination -> key
        t_min = ts.tables[mn.table1].astype(np.int64)
        len1 = table_lengths(topo, ts.tables[nm.table1]).astype(np.float64)
        len_min = table_lengths(topo, t_min).astype(np.float64)
        onehot = sparse.csr_matrix((np.ones(n), (np.arange(n), self.key_of)), shape=(n, K))
        size = np.asarray(onehot.sum(axis=0)).ravel()
        per_key = onehot.multiply(1.0 / np.maximum(size, 1)).tocsc()
        self.valid = np.ones((n, K), dtype=bool)
        self.valid[np.arange(n), self.key_of] = False
        # minimal candidate: first-hop port (group keys: the port most of the group's
        # switches use) and mean hops
        self.h_min = np.asarray(len_min @ per_key) if self.keys == "group" else len_min
        if self.keys == "group":
            self.j_min = group_majority(t_min, grp, K)[0]
        else:
            self.j_min = np.maximum(t_min, 0)
        # non-minimal candidate: phase-0 targets (uniform), their first hops, exit switches
        first, exit_sw, h0 = _phase0(ts, nm)
        targets = exit_sw.shape[1]
        w = (first >= 0).astype(np.float64)
        w /= np.maximum(w.sum(axis=1, keepdims=True), 1.0)
        R = topo.radix
        rows = np.repeat(np.arange(n), targets)
        self.w_nm = np.zeros((n, R))
        np.add.at(self.w_nm, (rows, np.maximum(first, 0).ravel()), w.ravel())
        mix = sparse.csr_matrix((w.ravel(), (rows, np.maximum(exit_sw, 0).ravel())),
                                shape=(n, n))
        h_sw = (w * h0).sum(axis=1)[:, None] + np.asarray(mix @ len1)
        self.h_nm = np.asarray(h_sw @ per_key) if self.keys == "group" else h_sw
        if params.view == "path":
            rep = np.array([int(np.flatnonzero(self.key_of == k)[0]) for k in range(K)])
            self.min_path = _path_ports(topo, t_min, rep, self.keys == "group",
                                        np.arange(K), self.valid)
            self.nm_w = w
            self.nm_path = _phase0_ports(ts, nm, first)
        elif params.view != "first-hop":
            raise ValueError(f"view {params.view!r}; expected first-hop or path")
        self.share = np.zeros((n, K), dtype=np.int64)
        self.last = np.zeros((n, K), dtype=np.int8)       # direction of the last move
        self.flips = np.zeros((n, K), dtype=np.int64)     # reversals in a row

    def costs(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(q_min, q_nonmin)`` per (source, key) from port occupancies ``q[N, R]``, with the
        hop counts ``(H_min, H_nonmin)``."""
        if self.p.view == "path":
            q_min = _fullest(q, self.min_path)
            q_nm = np.nansum(self.nm_w * np.nan_to_num(_fullest(q, self.nm_path)), axis=1)
        else:
            q_min = np.take_along_axis(q, self.j_min, axis=1)
            q_nm = np.nansum(self.w_nm * q, axis=1)
        q_nm = np.where(np.isnan(q).all(axis=1), np.nan, q_nm)[:, None]
        return q_min, np.broadcast_to(q_nm, q_min.shape), self.h_min, self.h_nm

    def decide(self, q: np.ndarray) -> np.ndarray:
        """One decision round on occupancies ``q[N, R]`` (NaN: unknown).  Updates
        :attr:`share` and returns the ``(u, k)`` pairs whose share changed (``int[M, 2]``).

        The rule sees each candidate's per-hop wait ``occupancy + 1`` (an M/M/1 queue's
        sojourn in service times is ``L + 1``), so on idle paths hop counts decide (minimal),
        and under load the queues do."""
        p = self.p
        q_min, q_nm, h_min, h_nm = self.costs(q)
        known = ~(np.isnan(q_min) | np.isnan(q_nm))
        qm, qn = np.nan_to_num(q_min) + 1.0, np.nan_to_num(q_nm) + 1.0
        hm, hn = np.maximum(h_min, 1.0), np.maximum(h_nm, 1.0)
        # the shared rule, with the dead band folded into the candidates' queues.  The band
        # is a share of the queueing part of the costs (not of the hops: idle paths go
        # minimal); a move against the last one takes the band times 2^(reversals in a
        # row, at most MAX_WIDEN), so a balance that lies between two steps ends resting
        # on one of them instead of alternating
        band = p.hysteresis * 0.5 * ((qm - 1.0) * hm + (qn - 1.0) * hn)
        widen = np.exp2(np.minimum(self.flips, MAX_WIDEN))
        up = ~ugal_kim(qm, hm, qn + (band * np.where(self.last == -1, widen, 1.0) + p.floor)
                       / hn, hn)
        down = ugal_kim(qm + band * np.where(self.last == 1, widen, 1.0) / hm, hm, qn, hn) & ~up
        a, b = qm * hm, qn * hn
        rel = np.abs(a - b) / np.maximum(a + b, 1e-12)
        step = np.maximum(1, np.rint(p.gain * rel * self.slots)).astype(np.int64)
        # back toward minimal one slot a round: after a detour the minimal path's estimate
        # is optimistic (it no longer carries what was moved off it), and every source sees
        # that at once — large moves back would send them all back together
        new = self.share + np.where(up, step, 0) - np.where(down, 1, 0)
        new = np.clip(new, 0, self.slots)
        new[~known] = 0                                   # no estimate: MIN
        new[~self.valid] = 0
        way = np.sign(new - self.share).astype(np.int8)
        moved = way != 0
        self.flips = np.where(moved, np.where(way == -self.last, self.flips + 1, 0), self.flips)
        self.last = np.where(moved, way, self.last)
        self.share = new
        return np.argwhere(moved)

    def fraction(self) -> np.ndarray:
        """``float[N, K]`` non-minimal share of every (source, key)."""
        return self.share / self.slots

    def by_destination(self) -> np.ndarray:
        """``float[K]`` mean non-minimal share per destination key over its sources."""
        f = np.where(self.valid, self.fraction(), 0.0)
        return f.sum(axis=0) / np.maximum(self.valid.sum(axis=0), 1)


def _phase0(ts: TableSet, c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (source, phase-0 target): the first-hop port, the switch where phase 1 starts and
    the hops up to it (``-1`` where the target is the source itself or its group)."""
    topo = ts.topo
    n = topo.n_switches
    t0 = ts.tables[c.table0].astype(np.int64)
    adj = topo.adj.astype(np.int64)
    rows = np.arange(n)[:, None]
    if c.target0 == "group":
        grp = topo.group.astype(np.int64)
        G = topo.n_groups
        tg = np.broadcast_to(np.arange(G)[None, :], (n, G))
        first = np.where(grp[:, None] == tg, -1, t0)
        cur = np.broadcast_to(rows, (n, G)).copy()
        hops = np.zeros((n, G))
        for _ in range(n):
            moving = grp[cur] != tg
            if not moving.any():
                break
            nxt = adj[cur, t0[cur, tg]]
            cur = np.where(moving, nxt, cur)
            hops += moving
        return first, np.where(first >= 0, cur, -1), hops
    first = t0.copy()
    first[np.arange(n), np.arange(n)] = -1
    if c.exit == "first_hop":
        nb = adj[rows, np.maximum(first, 0)]
        return first, np.where(first >= 0, nb, -1), (first >= 0).astype(np.float64)
    hops = table_lengths(topo, ts.tables[c.table0]).astype(np.float64)
    ex = np.broadcast_to(np.arange(n)[None, :], (n, n))
    return first, np.where(first >= 0, ex, -1), hops


def _fullest(q: np.ndarray, ports: np.ndarray) -> np.ndarray:
    """The largest occupancy among each path's ports (``ports[..., h]``: flat port ids,
    ``-1`` past the path's end)."""
    v = np.where(ports >= 0, q.ravel()[np.maximum(ports, 0)], -np.inf)
    m = v.max(axis=-1)
    return np.where(np.isneginf(m), np.nan, m)


def _walk_ports(adj, table, cur, col, done) -> np.ndarray:
    """Flat port ids ``u * R + j`` of the walks from ``cur`` following ``table[:, col]`` until
    ``done(cur)``; ``int64[..., H]`` padded with ``-1``."""
    R = adj.shape[1]
    hops = []
    cur = cur.copy()
    for _ in range(adj.shape[0]):
        moving = ~done(cur)
        if not moving.any():
            break
        j = np.where(moving, table[cur, col], 0)
        hops.append(np.where(moving, cur * R + j, -1))
        cur = np.where(moving, adj[cur, np.maximum(j, 0)], cur)
    return np.stack(hops, axis=-1) if hops else np.full(cur.shape + (1,), -1)


def _path_ports(topo, t_min, rep, group: bool, keys, valid) -> np.ndarray:
    """Ports of every (source, key) minimal path: to the key's switch, or until it enters
    the key's group."""
    n = topo.n_switches
    adj = topo.adj.astype(np.int64)
    cur = np.broadcast_to(np.arange(n)[:, None], valid.shape).copy()
    col = np.broadcast_to(rep[None, :], valid.shape)
    kk = np.broadcast_to(keys[None, :], valid.shape)
    grp = topo.group.astype(np.int64)
    done = (lambda c: (grp[c] == kk) | ~valid) if group else (lambda c: (c == kk) | ~valid)
    return _walk_ports(adj, t_min, cur, col, done)


def _phase0_ports(ts: TableSet, c, first: np.ndarray) -> np.ndarray:
    """Ports of every (source, phase-0 target) Valiant path up to the end of phase 0."""
    topo = ts.topo
    n, T = first.shape
    adj = topo.adj.astype(np.int64)
    R = adj.shape[1]
    if c.exit == "first_hop":
        rows = np.arange(n)[:, None]
        return np.where(first >= 0, rows * R + first, -1)[..., None]
    t0 = ts.tables[c.table0].astype(np.int64)
    cur = np.broadcast_to(np.arange(n)[:, None], (n, T)).copy()
    col = np.broadcast_to(np.arange(T)[None, :], (n, T))
    off = first < 0
    if c.target0 == "group":
        grp = topo.group.astype(np.int64)
        return _walk_ports(adj, t0, cur, col, lambda x: (grp[x] == col) | off)
    return _walk_ports(adj, t0, cur, col, lambda x: (x == col) | off)
