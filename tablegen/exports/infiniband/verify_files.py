"""Prove the written InfiniBand files themselves (what ``fabroute verify DIR`` runs): every
(source HCA, destination LID) packet walked through ``lfts.dump`` with its ``path-sl.txt`` SL and
the ``sl2vl.dump`` VLs, the channel dependency graph of those walks per VL, and the LFTs
compared with the table set's layers (:func:`verify_ib_files`).  The files are read by
:mod:`tablegen.exports.infiniband.read`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.infiniband.layers import IbLayers, build_layers
from tablegen.exports.infiniband.limits import IB_DATA_VLS, NUM_SLS, VL_DROP
from tablegen.exports.infiniband.sls import cdg_summary, variant_layers
from tablegen.tables import TableSet
from tablegen.verify import cdg_edges

# how a (source HCA, destination LID) walk through the files ends; _OK = delivered
_OK, _LOOP, _DEAD_PORT, _WRONG_NODE, _DROPPED, _TOO_LONG = range(6)
_FAILS = {_LOOP: "loop", _DEAD_PORT: "leave on a port without a link",
          _WRONG_NODE: "end at another node than the LID's", _DROPPED: "meet VL 15 (drop)",
          _TOO_LONG: "exceed their LID offset's hop bound"}
SL_BLOCK_CELLS = 8_000_000     # (source HCA, LID) SLs computed per block: bounds the memory


@dataclass(eq=False)
class _Files:
    """The exported files as arrays; switches and HCAs by their position in guids.json."""

    sw_id: list[int]            # guids.json "id" of each switch
    host_name: list[str]
    lft: np.ndarray             # int16[N, T] out port per (switch, LID)
    vl: np.ndarray              # uint8[N, P + 1, P + 1, 16] VL per (switch, in, out, SL)
    ca_vl: np.ndarray           # uint8[H, 16] the HCA's VL per SL on its own link
    peer_sw: np.ndarray         # int32[N, P + 1] switch behind a port, -1 for none
    peer_port: np.ndarray       # int32[N, P + 1] its port number there
    peer_host: np.ndarray       # int32[N, P + 1] HCA behind a port, -1 for none
    host_sw: np.ndarray         # int32[H] switch and port each HCA is wired to
    host_port: np.ndarray
    lid_host: np.ndarray        # int32[T] HCA owning a LID, -1 for none
    lid_sw: np.ndarray          # int32[T] switch owning a LID, -1 for none
    lid_off: np.ndarray         # int32[T] LID offset (0 for a switch LID)


def _file_arrays(f) -> _Files:
    """Arrays of an :func:`emulation.ibsim.apply.load_table_set` result; raises its
    :class:`~emulation.ibsim.BadInput` for wiring a packet could not follow."""
    switches, hosts = f.guids["switches"], f.guids["hosts"]
    n, H, step = len(switches), len(hosts), 1 << f.lmc
    sw_of = {int(s["guid"], 16): k for k, s in enumerate(switches)}
    host_of = {int(h["node_guid"], 16): k for k, h in enumerate(hosts)}
    P1 = max(int(s["num_ports"]) for s in switches) + 1
    T = max(max(int(s["lid"]) for s in switches), max(int(h["lid"]) for h in hosts) + step) + 1
    lid_host = np.full(T, -1, dtype=np.int32)
    lid_sw = np.full(T, -1, dtype=np.int32)
    lid_off = np.zeros(T, dtype=np.int32)
    lid_sw[[int(s["lid"]) for s in switches]] = np.arange(n, dtype=np.int32)
    base = np.array([int(h["lid"]) for h in hosts], dtype=np.int64)
    lid_host[(base[:, None] + np.arange(step)).ravel()] = np.repeat(np.arange(H), step)
    lid_off[(base[:, None] + np.arange(step)).ravel()] = np.tile(np.arange(step), H)

    peer_sw = np.full((n, P1), -1, dtype=np.int32)
    peer_port = np.full((n, P1), -1, dtype=np.int32)
    peer_host = np.full((n, P1), -1, dtype=np.int32)
    host_sw = np.full(H, -1, dtype=np.int32)
    host_port = np.full(H, -1, dtype=np.int32)
    for g, (kind, ports) in f.net.items():
        for p, (pg, pp) in ports.items():
            if not 0 < p < P1 or not 0 < pp < P1:
                raise BadInput(f"fabric.net: link 0x{g:016x}[{p}] - 0x{pg:016x}[{pp}] uses a "
                               f"port beyond the {P1 - 1} ports of the largest switch")
            if kind == "Hca":
                if p == 1 and pg in sw_of:
                    host_sw[host_of[g]], host_port[host_of[g]] = sw_of[pg], pp
                continue
            u = sw_of[g]
            if pg in sw_of:
                peer_sw[u, p], peer_port[u, p] = sw_of[pg], pp
            else:
                peer_host[u, p] = host_of[pg]
    lonely = np.flatnonzero(host_sw < 0)
    if len(lonely):
        raise BadInput(f"fabric.net: HCA {hosts[lonely[0]]['name']} has no port 1 linked to a "
                       f"switch ({len(lonely)} such HCAs); expected each HCA wired to one")

    lft = np.zeros((n, T), dtype=np.int16)
    # the load checks demand a row for every (in, out) a switch can use; should a wiring
    # mismatch reach one they do not, it reads as a drop instead of passing
    vl = np.full((n, P1, P1, NUM_SLS), VL_DROP, dtype=np.uint8)
    lft[[sw_of[g] for g in f.lfts]] = f.lfts.dense(T, 0)
    ca_vl = np.empty((H, NUM_SLS), dtype=np.uint8)
    ca_of = {int(h["port_guid"], 16): k for k, h in enumerate(hosts)}
    for g, (kind, rows) in f.sl2vl.items():
        if kind == "Switch":
            io = np.array(list(rows.keys()), dtype=np.int64).reshape(-1, 2)
            vl[sw_of[g], io[:, 0], io[:, 1]] = np.array(list(rows.values()), dtype=np.uint8)
        else:
            ca_vl[ca_of[g]] = rows[(0, 0)]
    return _Files([int(s["id"]) for s in switches], [h["name"] for h in hosts], lft, vl, ca_vl,
                  peer_sw, peer_port, peer_host, host_sw, host_port, lid_host, lid_sw, lid_off)


class _PathSls:
    """``path-sl.txt`` as OpenSM's ``path_sl`` hook applies it (first matching rule; none: the
    QoS policy's SL 0), evaluated for blocks of source HCAs over every LID at once."""

    def __init__(self, f, fa: _Files):
        rules = f.path_sl.rules
        hosts, switches = f.guids["hosts"], f.guids["switches"]
        step, T = 1 << f.lmc, len(fa.lid_off)
        self.none = len(rules)          # "no rule" sorts after every rule
        self.sl = np.array([r[3] for r in rules] + [0], dtype=np.uint8)
        src_of = {int(h["port_guid"], 16): k for k, h in enumerate(hosts)}
        lids_of = {int(h["port_guid"], 16): (int(h["lid"]), step) for h in hosts}
        lids_of.update((int(s["guid"], 16), (int(s["lid"]), 1)) for s in switches)
        self.cols = np.full(T, self.none, dtype=np.int32)      # best wildcard-source rule
        self.src_any, exact = [], []
        for k, (src, dst, off, _) in enumerate(rules):
            if src is not None and dst is not None:
                if src in src_of:    # a switch's port never sends the walked packets
                    exact.append((k, src_of[src], *lids_of[dst], -1 if off is None else off))
                continue
            if dst is None:
                sel = np.arange(T) if off is None else np.flatnonzero(fa.lid_off == off)
            else:
                lo, cnt = lids_of[dst]
                sel = lo + (np.arange(cnt) if off is None else np.arange(off, min(off + 1, cnt)))
            if src is None:
                np.minimum.at(self.cols, sel, k)
            elif src in src_of:
                self.src_any.append((src_of[src], sel, k))
        # the (source, destination) rules, one (row, LID, rule) triple per LID they cover;
        # there are hundreds of thousands, so no NumPy call per rule
        k, row, lo, cnt, off = np.array(exact, dtype=np.int64).reshape(-1, 5).T
        cnt = np.where(off < 0, cnt, (off < cnt).astype(np.int64))
        lo = np.where(off < 0, lo, lo + off)
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)
        col = np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - first
        row, k = np.repeat(row, cnt), np.repeat(k, cnt)
        order = np.argsort(row, kind="stable")
        self.rows, self.rcols, self.ridx = row[order], col[order], k[order]
        # the SL matrix, for the cells no rule matches: group of each source HCA and LID
        self.path_sl = ps = f.path_sl
        if ps.matrix:
            self.src_group = ps.groups(int(h["port_guid"], 16) for h in hosts)
            self.lid_group = np.full(T, -1, dtype=np.int64)
            for guid, (lo, cnt) in lids_of.items():
                self.lid_group[lo:lo + cnt] = ps.group_of.get(guid, -1)

    def block(self, h0: int, h1: int) -> np.ndarray:
        """``uint8[h1 - h0, T]``: the SL of every (source HCA, destination LID)."""
        best = np.repeat(self.cols[None, :], h1 - h0, axis=0)
        a, b = np.searchsorted(self.rows, [h0, h1])
        np.minimum.at(best, (self.rows[a:b] - h0, self.rcols[a:b]), self.ridx[a:b])
        for h, sel, k in self.src_any:
            if h0 <= h < h1:
                best[h - h0, sel] = np.minimum(best[h - h0, sel], k)
        out = self.sl[best]
        if self.path_sl.matrix:
            sl, given = self.path_sl.matrix_sls(self.src_group[h0:h1, None],
                                                self.lid_group[None, :])
            take = given & (best == self.none)
            out[take] = sl[take]
        return out


@njit(cache=True)
def _walk_files(h0, sl, host_sw, host_port, ca_vl, lft, vlmap, peer_sw, peer_port, peer_host,
                lid_host, lid_sw, lid_off, bound, deps, hist, vl_seen, sl_seen, fails):
    """Walk every (source HCA ``h0 + b``, destination LID) packet through the LFTs with SL
    ``sl[b, lid]``, taking each hop's VL from the SL2VL rows as a switch does.  Marks
    ``deps[in channel, out port * V + out VL]`` for consecutive switch-to-switch channels
    ``(switch * (P + 1) + port) * V + VL``, counts delivered paths by hops in ``hist[offset]``
    (row ``L``: switch LIDs), and per failure kind its count and first (HCA, LID) in
    ``fails``."""
    n, T = lft.shape
    P1 = peer_sw.shape[1]
    V = deps.shape[1] // P1
    L = hist.shape[0] - 1
    for b in range(sl.shape[0]):
        h = h0 + b
        for lid in range(1, T):
            dh, ds = lid_host[lid], lid_sw[lid]
            if (dh < 0 and ds < 0) or dh == h:
                continue
            s = sl[b, lid]
            sl_seen[s] = True
            u, i, hops, inch, status = host_sw[h], host_port[h], 0, -1, _OK
            if ca_vl[h, s] == VL_DROP:
                status = _DROPPED
            while status == _OK:
                o = lft[u, lid]
                if o == 0:
                    if ds != u:
                        status = _WRONG_NODE
                    break
                vl = vlmap[u, i, o, s]
                if vl == VL_DROP:
                    status = _DROPPED
                    break
                vl_seen[vl] = True
                v = peer_sw[u, o]
                if v < 0:
                    if peer_host[u, o] < 0:
                        status = _DEAD_PORT
                    elif peer_host[u, o] != dh:
                        status = _WRONG_NODE
                    break
                ch = (u * P1 + o) * V + vl
                if inch >= 0:
                    deps[inch, o * V + vl] = True
                inch, i, u = ch, peer_port[u, o], v
                hops += 1
                if hops > n:
                    status = _LOOP
            row = L if ds >= 0 else lid_off[lid]
            if status == _OK and hops > bound[row]:
                status = _TOO_LONG
            if status == _OK:
                hist[row, hops] += 1
            else:
                fails[status, 0] += 1
                if fails[status, 0] == 1:
                    fails[status, 1], fails[status, 2] = h, lid


def verify_ib_files(f, ts: TableSet, max_cycle_print: int = 32,
                    block_cells: int = SL_BLOCK_CELLS, binding=None) -> dict:
    """Prove an InfiniBand export from its files alone: what OpenSM loads (``lfts.dump``,
    ``sl2vl.dump``, ``path-sl.txt``), the LIDs of ``guids.json`` and the wiring ibsim builds
    (``fabric.net``), as :func:`emulation.ibsim.apply.load_table_set` read them into ``f``.

    * Every (source HCA, destination LID) packet — HCA and switch LIDs, every LID offset — is
      walked through the LFTs with the SL ``path-sl.txt`` gives it (first matching rule, as
      OpenSM's ``path_sl`` hook); each hop's VL is the SL2VL row ``(in port, out port)[SL]``
      of its switch, the first from the HCA's own table.  It must reach the LID's node,
      without a loop, a port without a link or VL 15, within the hop bound of its offset's
      layer (switch LIDs: layer 0's), which comes from ``ts``, not from the files.
    * The channel dependency graph over ``(switch, out port, VL)`` of those walks must be
      acyclic.  An HCA's link is left out: its injection channel has no incoming and its
      ejection channel no outgoing dependency.
    * The files must agree with ``ts``: guids.json's GUIDs and LIDs with the address plan,
      fabric.net's links with the topology, and every LFT entry with the layers
      :func:`build_layers` gives ``ts`` at the files' LMC and recorded seed.  With
      ``binding`` (:class:`~tablegen.fabrics.bind.Binding`, files of a fabric as cabled):
      through its GUIDs and port numbers, every cable the tables use where it puts it;
      fabric.net may hold more cables (the ones the tables route around).

    Returns a JSON-ready dict like :func:`verify_ib`'s (``layers`` per LID offset counting
    walked (HCA, LID) paths, ``switch_lids``, ``tables``); ``errors`` print the first failing
    path or the cycle channel by channel.  Raises ``BadInput`` when fabric.net's wiring
    cannot be walked.

    Complexity: O(H T D) compiled steps for H HCAs, T LIDs and paths of D hops, plus the
    path-SL rules expanded once; memory O(N P^2 V^2) bits of dependencies for N switches of
    P ports, and SL blocks of ``block_cells`` (source HCA, LID) pairs.
    """
    fa = _file_arrays(f)
    seed = int(f.guids.get("ib", {}).get("seed", 1))
    errors: list[str] = []
    rep: dict = {"ok": False, "source": "files", "dir": str(f.dir), "routing": ts.routing,
                 "topology": ts.topo.name(), "lmc": f.lmc, "seed": seed, "errors": errors,
                 "data_vls": IB_DATA_VLS, "vl_scheme": f.guids.get("ib", {}).get("vl_scheme")}
    variant = f.guids.get("ib", {}).get("variant")
    rep["variant"] = variant
    try:
        layers = (build_layers(ts, f.lmc, seed) if variant is None
                  else variant_layers(ts, f.lmc, seed, variant))
    except NotExpressible as e:
        errors.append(f"the table set has no InfiniBand layers at LMC {f.lmc}: {e}")
        return rep
    n, T = fa.lft.shape
    H, P1, V, L = len(fa.host_name), fa.peer_sw.shape[1], IB_DATA_VLS, layers.num_layers
    bound = np.array(layers.bounds + [layers.bounds[0]], dtype=np.int64)
    deps = np.zeros((n * P1 * V, P1 * V), dtype=bool)
    hist = np.zeros((L + 1, n + 2), dtype=np.int64)
    vl_seen = np.zeros(NUM_SLS, dtype=bool)
    sl_seen = np.zeros(NUM_SLS, dtype=bool)
    fails = np.zeros((len(_FAILS) + 1, 3), dtype=np.int64)
    first_sl: dict[int, int] = {}
    sls = _PathSls(f, fa)
    rows = max(1, block_cells // T)
    for h0 in range(0, H, rows):
        blk = sls.block(h0, min(H, h0 + rows))
        _walk_files(h0, blk, fa.host_sw, fa.host_port, fa.ca_vl, fa.lft, fa.vl, fa.peer_sw,
                    fa.peer_port, fa.peer_host, fa.lid_host, fa.lid_sw, fa.lid_off, bound, deps,
                    hist, vl_seen, sl_seen, fails)
        for k in np.flatnonzero(fails[:, 0]).tolist():
            if k not in first_sl:       # its first failure is in this block
                first_sl[k] = int(blk[fails[k, 1] - h0, fails[k, 2]])
    for k, what in _FAILS.items():
        if fails[k, 0]:
            h, lid = int(fails[k, 1]), int(fails[k, 2])
            errors.append(f"{fails[k, 0]} (HCA, LID) paths {what}, e.g. "
                          f"{_path_text(fa, layers, bound, h, lid, first_sl[k])}")
    rep["paths"] = int(hist.sum() + fails[:, 0].sum())
    rep["layers"] = [dict(offset=k, kind=layers.kinds[k], **_hist(hist[k], bound[k]))
                     for k in range(L)]
    rep["switch_lids"] = _hist(hist[L], bound[L])
    rep["sls_used"] = int(sl_seen.sum())
    rep["vls_used"] = int(vl_seen.sum())
    rep["vl_max"] = int(np.flatnonzero(vl_seen).max(initial=0))
    ins, outs = cdg_edges(deps, fa.peer_sw, V)
    rep["cdg"], cyc = cdg_summary(ins, outs, n * P1 * V, V)
    if cyc:
        text = " -> ".join(f"{fa.sw_id[x // (P1 * V)]}:{x // V % P1}(vl{x % V})"
                           for x in cyc[:max_cycle_print])
        errors.append(f"IB channel dependency graph of the files has a cycle of {len(cyc)} "
                      f"channels: {text}")
    rep["tables"] = _agreement(f, fa, ts, layers, errors, binding)
    rep["ok"] = not errors
    return rep


def _hist(h: np.ndarray, bound: int) -> dict:
    used = np.flatnonzero(h)
    return {"bound": int(bound), "max_hops": int(used.max(initial=0)),
            "hist": {str(x): int(h[x]) for x in used}}


def _path_text(fa: _Files, layers: IbLayers, bound: np.ndarray, h: int, lid: int,
               sl: int) -> str:
    """One walked packet, hop by hop (``switch:out port(vl)``), and how it ends."""
    dh, ds = int(fa.lid_host[lid]), int(fa.lid_sw[lid])
    k = int(fa.lid_off[lid])
    dst = (f"switch {fa.sw_id[ds]}" if ds >= 0 else
           f"{fa.host_name[dh]} offset {k} ({layers.kinds[k]})")
    head = f"{fa.host_name[h]} -> LID 0x{lid:04x} = {dst}, SL {sl}: "
    if fa.ca_vl[h, sl] == VL_DROP:
        return head + f"the HCA's SL2VL maps SL {sl} to VL {VL_DROP}"
    u, i, text, seen, hops = int(fa.host_sw[h]), int(fa.host_port[h]), [], set(), 0
    while True:
        if u in seen:
            text.append(f"{fa.sw_id[u]} again: a loop")
            break
        seen.add(u)
        o = int(fa.lft[u, lid])
        if o == 0:
            text.append(f"{fa.sw_id[u]}:0" + ("" if ds == u else " (not the LID's switch)"))
            break
        vl = int(fa.vl[u, i, o, sl])
        text.append(f"{fa.sw_id[u]}:{o}(vl{vl})")
        if vl == VL_DROP:
            text[-1] += f" dropped (SL2VL row in {i} out {o})"
            break
        if fa.peer_sw[u, o] < 0:
            ph = int(fa.peer_host[u, o])
            text.append(fa.host_name[ph] if ph >= 0 else "no link")
            break
        u, i, hops = int(fa.peer_sw[u, o]), int(fa.peer_port[u, o]), hops + 1
    row = len(layers.kinds) if ds >= 0 else k
    tail = f" ({hops} hops; the bound is {bound[row]})" if hops > bound[row] else ""
    return head + " -> ".join(text) + tail


def _agreement(f, fa: _Files, ts: TableSet, layers: IbLayers, errors: list[str],
               binding=None) -> dict:
    """Append to ``errors`` where the files differ from ``ts``: guids.json's ids, GUIDs and
    LIDs against the address plan, fabric.net's links against the topology, the LFTs entry
    by entry against ``layers``.  Returns the LFT comparison's counts."""
    from tablegen.exports.infiniband.lids import host_port_guid, lid_plan, switch_guid
    from tablegen.exports.infiniband.write import lft_lids, lft_row, port_map

    topo = ts.topo
    n, r = topo.adj.shape
    switches, hosts = f.guids["switches"], f.guids["hosts"]
    if (len(switches), len(hosts)) != (n, topo.n_hosts):
        errors.append(f"the files describe {len(switches)} switches and {len(hosts)} HCAs; "
                      f"the table set's {topo.name()} has {n} and {topo.n_hosts}")
        return {}
    plan = lid_plan(topo, f.lmc)
    ht = topo.host_table()
    got = np.array([[int(s["id"]), int(s["guid"], 16), int(s["lid"]), int(s["num_ports"])]
                    for s in switches], dtype=np.uint64)
    pm = port_map(topo, binding)
    if binding is None:
        sw_guid, ports, h_guid = switch_guid(np.arange(n)), topo.hosts + r, host_port_guid(ht[:, 0])
    else:
        sw_guid = np.array([int(g, 16) for g in binding.switch], dtype=np.uint64)
        ports = [binding.fabric.switches[g]["ports"] for g in binding.switch]
        h_guid = np.array([int(g, 16) for g in binding.host], dtype=np.uint64)
    want = _u64(np.arange(n), sw_guid, plan.switch_lid, ports)
    got_h = np.array([[int(h["id"]), int(h["port_guid"], 16), int(h["lid"]), int(h["switch"]),
                       int(h["switch_port"])] for h in hosts], dtype=np.uint64)
    want_h = _u64(ht[:, 0], h_guid, plan.host_lid, ht[:, 1], pm[ht[:, 1], ht[:, 2]])
    for what, a, b, fields in (("switch", got, want, "id, GUID, LID, ports"),
                               ("HCA", got_h, want_h, "id, port GUID, LID, switch, port")):
        bad = np.flatnonzero((a != b).any(axis=1))
        if len(bad):
            k = int(bad[0])
            errors.append(f"guids.json: {what} record {k} has ({fields}) = "
                          f"{a[k].tolist()}; the table set's address plan gives {b[k].tolist()}")
    if errors and errors[-1].startswith("guids.json"):
        return {}
    P1 = fa.peer_sw.shape[1]
    s, j = np.nonzero(topo.adj >= 0)
    t = topo.adj[s, j]
    exp_sw = np.full((n, P1), -1, dtype=np.int64)
    exp_port = np.full((n, P1), -1, dtype=np.int64)
    exp_host = np.full((n, P1), -1, dtype=np.int64)
    exp_sw[s, pm[s, topo.hosts[s] + 1 + j]] = t
    exp_port[s, pm[s, topo.hosts[s] + 1 + j]] = pm[t, topo.hosts[t] + 1 + topo.peer[s, j]]
    exp_host[ht[:, 1], pm[ht[:, 1], ht[:, 2]]] = ht[:, 0]
    exp_port[ht[:, 1], pm[ht[:, 1], ht[:, 2]]] = 1
    got_port = np.where(fa.peer_host >= 0, 1, fa.peer_port)
    bad = (exp_sw != fa.peer_sw) | (exp_port != got_port) | (exp_host != fa.peer_host)
    if binding is not None:
        # a fabric's cables the tables route around (moved, extra) are its own business
        bad &= (exp_sw >= 0) | (exp_host >= 0)
    stray = np.flatnonzero((fa.host_sw != ht[:, 1]) | (fa.host_port != pm[ht[:, 1], ht[:, 2]]))
    if len(stray):
        h = int(stray[0])
        errors.append(f"fabric.net: HCA {fa.host_name[h]} is wired to switch "
                      f"{fa.host_sw[h]} port {fa.host_port[h]}; the topology has switch "
                      f"{ht[h, 1]} port {pm[ht[h, 1], ht[h, 2]]}")
        return {}
    if bad.any():
        u, p = (int(x[0]) for x in np.nonzero(bad))
        errors.append(f"fabric.net: port {p} of switch {u} is wired to "
                      f"{_peer_text(fa.peer_sw[u, p], got_port[u, p], fa.peer_host[u, p])}; "
                      f"the topology has "
                      f"{_peer_text(exp_sw[u, p], exp_port[u, p], exp_host[u, p])}")
        return {}
    lids = lft_lids(ts, plan)
    diff, first = 0, None
    for u in range(n):
        exp = pm[u][lft_row(topo, lids, layers, u)]
        bad = np.flatnonzero(fa.lft[u, lids[0]] != exp)
        diff += len(bad)
        if len(bad) and first is None:
            first = (u, int(lids[0][bad[0]]), int(fa.lft[u, lids[0][bad[0]]]), int(exp[bad[0]]),
                     int(lids[5][bad[0]]))
    if first:
        u, lid, got_p, exp_p, k = first
        errors.append(f"lfts.dump differs from the table set's layers (LMC {f.lmc}, seed "
                      f"{layers.info['seed']}) in {diff} of {n * len(lids[0])} entries, e.g. "
                      f"switch {u} LID 0x{lid:04x} (offset {k}, {layers.kinds[k]}): port "
                      f"{got_p} in the file, {exp_p} in the tables")
    return {"lft_entries": n * len(lids[0]), "lft_mismatches": diff}


def _u64(*cols) -> np.ndarray:
    """Columns as one uint64 array (np.stack would widen GUIDs next to ints to float64)."""
    return np.stack([np.asarray(c).astype(np.uint64) for c in cols], axis=1)


def _peer_text(sw: int, port: int, host: int) -> str:
    if host >= 0:
        return f"host {host}"
    return f"switch {sw} port {port}" if sw >= 0 else "nothing"
