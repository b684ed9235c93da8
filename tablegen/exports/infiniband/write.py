"""Write the InfiniBand files of a table set: ``ib/fabric.net`` (ibsim fabric), ``ib/lfts.dump``
(LFTs for OpenSM), ``ib/sl2vl.dump``, ``ib/path-sl.txt``, ``ib/guid2lid`` (OpenSM LID cache)
and ``ib/guids.json`` (our ids -> GUIDs, ports, LIDs); ``docs/formats.md`` specifies each.
The layers and SLs come from :mod:`tablegen.exports.infiniband.layers`; the files are read
back by :mod:`tablegen.exports.infiniband.read`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tablegen.errors import NotExpressible
from tablegen.exports.infiniband.lids import (
    HCA_GUID_BASE,
    HCA_GUID_STRIDE,
    SWITCH_GUID_BASE,
    LidPlan,
    hex16,
    host_node_guid,
    host_port_guid,
    lid_plan,
    switch_guid,
)
from tablegen.exports.infiniband.climb import CLIMB
from tablegen.exports.infiniband.phases import PHASE
from tablegen.exports.infiniband.limits import MAX_IB_PORT
from tablegen.exports.writer import (
    DEC,
    HEX,
    TEXT,
    Chunks,
    Job,
    RowFormats,
    interleave,
    json_chunks,
    macros,
    put_decimal,
    rendered,
    row_fields,
    run_jobs,
    template_env,
)
from tablegen.tables import PathClass, TableSet
from tablegen.topology import Topology

# LFT lines (switches x LIDs) up to which entries keep their "# <type> portguid ...: '<name>'"
# tail (~75 instead of 11 bytes a line)
LFT_COMMENT_LINES = 10_000_000
# LMC of a non-minimal routing's IB files when none is asked for: offset 0 its minimal paths,
# offset 1 a tree of its non-minimal class (docs/ib-routing.md, "Layers"); LMC 2..7 give more
# trees (targets) at 2-4x the LFT size and export time
NONMIN_LMC = 1


def nonminimal(ts: TableSet) -> list[str]:
    """The classes of ``ts`` whose paths detour through an intermediate (Valiant): what LID
    offsets >= 1 carry in InfiniBand, offset 0 being minimal."""
    return [c.name for c in ts.classes if c.inter != "none"]


def min_only(ts: TableSet, lmc: int) -> str | None:
    """Why IB files of ``ts`` at ``lmc`` carry its minimal paths only (LMC 0 and a
    non-minimal class: loaded into a subnet manager that is MIN routing); ``None`` when they
    carry every class."""
    classes = nonminimal(ts)
    if lmc or not classes:
        return None
    return (f"LMC 0 carries {ts.routing}'s minimal paths only (LID offset 0); its class "
            f"{', '.join(classes)} needs LMC >= 1 (LID offsets >= 1)")


def ib_record(ts: TableSet, lmc: int, seed: int, prefix: str,
              why: str | None = None) -> dict:
    """The manifest's ``exports.ib`` of IB files of ``ts``: ``lmc``, ``seed``, ``prefix`` and,
    when they carry its minimal paths only, ``min_only`` (:func:`min_only`; ``why``: why no
    higher LMC was used)."""
    rec = {"lmc": lmc, "seed": seed, "prefix": prefix}
    reason = min_only(ts, lmc)
    if reason:
        rec["min_only"] = reason + (f"; {why}" if why else "")
    return rec


def check_source_routed(ts: TableSet) -> None:
    """:class:`NotExpressible` when a class of ``ts`` begins in transit (PAR): an IB switch
    forwards by destination LID alone."""
    if "reroute" in ts.params:
        raise NotExpressible(f"{ts.routing}: class {ts.params['reroute']} begins at a packet's "
                             "second switch; an InfiniBand switch forwards by destination LID "
                             "and cannot move a packet to another path in transit")


def default_lmc(ts: TableSet) -> int:
    """The LMC of ``ts``'s IB files when none is asked for: :data:`NONMIN_LMC` for a routing
    with a non-minimal class, else 0 (callers fall back to 0, saying so
    (:func:`min_only`), where that LMC cannot be expressed)."""
    return NONMIN_LMC if nonminimal(ts) else 0


def lft_class(ts: TableSet) -> PathClass:
    """The class whose routes fill LID offset 0 (layer 0): MIN when the routing has it
    (UGAL-L), else its only class (a Valiant variant's layer 0 is its phase-1 MIN table;
    DSN-F's is its own routing)."""
    names = [c.name for c in ts.classes]
    return ts.cls("min") if "min" in names else ts.classes[-1]


def _ib_names(topo: Topology, binding=None):
    if binding is not None:
        from tablegen.fabrics.ibsim_net import net_names

        names = net_names(binding.fabric)
        return ([g[2:] for g in binding.switch], [names[g] for g in binding.switch],
                [f"{int(g, 16) - 1:016x}" for g in binding.host], [g[2:] for g in binding.host],
                [names[g] for g in binding.host])
    n, h = topo.n_switches, topo.n_hosts
    sw_hex = hex16(switch_guid(np.arange(n)))
    hn_hex = hex16(host_node_guid(np.arange(h)))
    hp_hex = hex16(host_port_guid(np.arange(h)))
    return sw_hex, [f"S-{g}" for g in sw_hex], hn_hex, hp_hex, [f"H-{g}" for g in hn_hex]


def ib_layers(ts: TableSet, lmc: int = 0, seed: int = 1, variant: str | None = None):
    """LMC layers with SLs (:func:`tablegen.exports.infiniband.sls.ib_routing`; ``variant``:
    the routing's IB variant) and their IB verification report; raises
    :class:`NotExpressible` when they do not fit or fail verification."""
    from tablegen.exports.infiniband.sls import ib_routing

    lid_plan(ts.topo, lmc)        # the LID budget first: cheap, and the clearest error
    layers, rep = ib_routing(ts, lmc, seed, variant)
    if not rep["ok"]:
        raise NotExpressible(f"{ts.routing} on {ts.topo.name()} (LMC {lmc}) fails InfiniBand "
                             f"verification: {rep['errors'][0]}")
    return layers, rep


def port_map(topo: Topology, binding=None) -> np.ndarray:
    """``int64[S, P + 1]``: the port number in the files of every planned port of every switch
    (0, the switch itself, stays 0): the plan's own numbering, or with ``binding``
    (:class:`~tablegen.fabrics.bind.Binding`) the fabric's (-1 where it has none)."""
    width = int(topo.hosts.max(initial=0)) + topo.radix + 1
    if binding is not None:
        return binding.port_array(width)
    return np.broadcast_to(np.arange(width, dtype=np.int64), (topo.n_switches, width))


def plan_ib(ts: TableSet, lmc: int = 0, lft_comments: bool | None = None, seed: int = 1,
             prefix: str = "ib/", ib=None, variant: str | None = None,
             binding=None) -> list[Job]:
    """The jobs writing the IB files of ``ts``; ``binding``
    (:class:`~tablegen.fabrics.bind.Binding`): keyed by the bound fabric's GUIDs and port
    numbers, ``fabric.net`` its cabling as is (docs/real-fabrics.md)."""
    topo = ts.topo
    n, r = topo.adj.shape
    check_source_routed(ts)
    nports = topo.hosts.astype(np.int64) + r
    if nports.max(initial=0) > MAX_IB_PORT:
        raise NotExpressible(f"{topo.name()}: a switch has {int(nports.max())} ports; InfiniBand "
                             f"numbers at most {MAX_IB_PORT}")
    plan = lid_plan(topo, lmc)
    layers, rep = ib if ib is not None else ib_layers(ts, lmc, seed, variant)
    missing = [f"class {c.name}: LID offsets >= 1 carry it; needs LMC >= 1"
               for c in ts.classes[1:] if lmc == 0]
    names = _ib_names(topo, binding)
    pmap = port_map(topo, binding)
    if lft_comments is None:
        lft_comments = n * (n + topo.n_hosts * (1 << lmc)) <= LFT_COMMENT_LINES
    net = ((lambda: _fabric_net(binding, plan, names)) if binding is not None else
           (lambda: _ibsim_chunks(ts, plan, names)))
    return [
        (prefix + "fabric.net", net),
        (prefix + "guids.json",
         lambda: json_chunks(_guids_doc(ts, plan, names, layers, rep, missing, binding))),
        (prefix + "guid2lid", lambda: _guid2lid_chunks(topo, plan, names)),
        (prefix + "lfts.dump", lambda: _lft_chunks(ts, plan, names, layers, missing,
                                                   lft_comments, pmap)),
        (prefix + "sl2vl.dump", lambda: _sl2vl_chunks(ts, plan, names, layers, binding)),
        (prefix + "path-sl.txt", lambda: _path_sl_chunks(ts, plan, names, layers)),
    ]


def export_ib(ts: TableSet, outdir, *, lmc: int = 0, seed: int = 1,
              lft_comments: bool | None = None, flat: bool = False, ib=None,
              variant: str | None = None, binding=None) -> list[str]:
    """Write the InfiniBand files into ``outdir/ib`` (``flat``: into ``outdir`` itself).

    ``lmc``/``seed`` choose the layers (:func:`ib_layers`); ``ib`` passes a
    ``(layers, report)`` pair computed already.

    ``lft_comments=False`` drops the ``# <type> portguid 0x…: '<name>'`` tail of every LFT
    line (about 6x smaller files); OpenSM then cannot remap LIDs it assigned differently, so
    load ``ib/guid2lid`` with ``honor_guid2lid_file TRUE``.  ``None`` (default) keeps the tail
    up to :data:`LFT_COMMENT_LINES` LFT lines (switches x LIDs) and drops it beyond: a
    2064-router Dragonfly would otherwise write 2.8 GB.
    """
    return run_jobs(outdir, plan_ib(ts, lmc, lft_comments, seed, "" if flat else "ib/", ib,
                                    variant, binding))


def _ibsim_limits(topo: Topology, plan: LidPlan) -> dict:
    n, r = topo.adj.shape
    ports = int((topo.hosts.astype(np.int64) + r + 1).sum()) + topo.n_hosts
    return {"N": n + topo.n_hosts, "S": n, "P": ports, "L": -(-(plan.top + 1) // 64) * 64}


def _ibsim_chunks(ts: TableSet, plan: LidPlan, names) -> Chunks:
    topo = ts.topo
    n, r = topo.adj.shape
    H = topo.n_hosts
    sw_hex, sw_name, hn_hex, _, h_name = names
    m = macros("ibsim.net.j2")
    yield str(m.preamble(
        ts.routing, topo.name(), n, H, len(topo.links), plan.lmc, f"0x{SWITCH_GUID_BASE:016x}",
        f"0x{HCA_GUID_BASE:016x}", f"0x{HCA_GUID_STRIDE:x}", _ibsim_limits(topo, plan)))
    rows = RowFormats(hn_hex + h_name + sw_hex + sw_name)
    hn, hname, sx, sname = 0, H, 2 * H, 2 * H + n          # where each string list starts
    D, T = DEC, TEXT
    f = row_fields(6)
    hca = rows.add(m.hca(f[0], f[1], f[2], f[3], f[4], plan.lmc, f[5]), [T, T, T, D, D, D])
    sw = rows.add(m.switch(*f[:4]), [T, D, T, D])
    port = rows.add(m.port(*f[:4]), [D, T, D, D])
    rows.compile()
    h, hsw, hport = topo.host_table().T
    # HCAs first: ibsim attaches clients (and the SM) to the first port it parses
    text, _, _ = rows.fill(np.full(H, hca), np.stack(
        [hn + h, hname + h, sname + hsw, hport, plan.host_lid, plan.switch_lid[hsw]], axis=1))
    yield memoryview(text)
    s = np.arange(n)
    ns, nj = np.nonzero(topo.adj >= 0)
    t = topo.adj[ns, nj].astype(np.int64)
    first = topo.hosts.astype(np.int64) + 1           # port number of network index 0
    text, _, _ = interleave(rows, [
        (s, sw, (sx + s, first + r - 1, sname + s, plan.switch_lid)),
        (hsw, port, (hport, hname + h, np.ones(H, dtype=np.int64), plan.host_lid)),
        (ns, port, (first[ns] + nj, sname + t, first[t] + topo.peer[ns, nj],
                    plan.switch_lid[t]))], 0, n)
    yield memoryview(text)


def _guids_doc(ts: TableSet, plan: LidPlan, names, layers, rep: dict, missing,
               binding=None) -> dict:
    """guids.json; with ``binding`` the fabric's GUIDs, port numbers (``ib_port``,
    ``peer_port``, ``switch_port``; ``port`` stays the plan's) and port counts."""
    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, hn_hex, hp_hex, h_name = names
    pm = port_map(topo, binding)
    off = topo.host_offset
    switches = []
    for s in range(n):
        hs = int(topo.hosts[s])
        ports = [{"port": e + 1, "ib_port": int(pm[s, e + 1]), "host": int(off[s]) + e,
                  "peer": h_name[int(off[s]) + e], "peer_guid": "0x" + hp_hex[int(off[s]) + e],
                  "peer_port": 1} for e in range(hs)]
        for j in np.flatnonzero(topo.adj[s] >= 0).tolist():
            t = int(topo.adj[s, j])
            pp = int(topo.hosts[t]) + 1 + int(topo.peer[s, j])
            ports.append({"port": hs + 1 + j, "ib_port": int(pm[s, hs + 1 + j]), "switch": t,
                          "peer": sw_name[t], "peer_guid": "0x" + sw_hex[t],
                          "peer_port": int(pm[t, pp])})
        num = hs + r if binding is None else \
            int(binding.fabric.switches[binding.switch[s]]["ports"])
        switches.append({"id": s, "name": sw_name[s], "guid": "0x" + sw_hex[s],
                         "lid": int(plan.switch_lid[s]), "num_ports": num, "ports": ports})
    step = 1 << plan.lmc
    hosts = [{"id": h, "name": h_name[h], "node_guid": "0x" + hn_hex[h],
              "port_guid": "0x" + hp_hex[h], "lid": int(plan.host_lid[h]),
              "lids": [int(plan.host_lid[h]), int(plan.host_lid[h]) + step - 1],
              "switch": s, "switch_port": int(pm[s, p])}
             for h, s, p in topo.host_table().tolist()]
    guid_plan = ({"fabric": "fabric.json", "hca_port_guid": "node_guid + 1"} if binding else
                 {"switch_base": f"0x{SWITCH_GUID_BASE:016x}",
                  "hca_base": f"0x{HCA_GUID_BASE:016x}", "hca_stride": HCA_GUID_STRIDE,
                  "hca_port_guid": "node_guid + 1"})
    return {
        "format": "fabroute-ib-guids", "version": 1, "routing": ts.routing,
        "topology": topo.name(), "lmc": plan.lmc, "top_lid": plan.top,
        "guid_plan": guid_plan,
        "lft_class": layers.kinds[0], "not_in_lfts": missing,
        "ibsim_limits": (_ibsim_limits(topo, plan) if binding is None
                         else _fabric_limits(binding, plan)),
        "ib": dict({k: rep[k] for k in ("layers", "sls_used", "vls_used", "vl_max",
                                        "data_vls", "shortcuts", "cdg", "vl_scheme",
                                        "variant")},
                   seed=layers.info["seed"],
                   **{k: layers.info[k] for k in ("escape_root", "escape_destinations")
                      if k in layers.info}),
        "switches": switches, "hosts": hosts,
    }


def _fabric_limits(binding, plan: LidPlan) -> dict:
    """ibsim's limits for the bound fabric, its linear FDB wide enough for the LID plan."""
    from tablegen.fabrics.ibsim_net import ibsim_limits

    lim = ibsim_limits(binding.fabric)
    return dict(lim, L=max(lim["L"], -(-(plan.top + 1) // 64) * 64))


def _fabric_net(binding, plan: LidPlan, names) -> Chunks:
    """The bound fabric's ibsim net file (its cabling as is), with the LID plan's LIDs."""
    from tablegen.fabrics.ibsim_net import net_text

    lids = dict(zip(binding.switch, plan.switch_lid.tolist()))
    lids.update(zip(binding.host, plan.host_lid.tolist()))
    yield net_text(binding.fabric, lids=lids, lmc=plan.lmc)


def _guid2lid_chunks(topo: Topology, plan: LidPlan, names) -> Chunks:
    sw_hex, _, _, hp_hex, _ = names
    step = 1 << plan.lmc
    rows = [(g, int(lid), int(lid)) for g, lid in zip(sw_hex, plan.switch_lid.tolist())]
    rows += [(g, int(lid), int(lid) + step - 1) for g, lid in zip(hp_hex, plan.host_lid.tolist())]
    return rendered(template_env().get_template("guid2lid.j2"), rows=rows)


def lft_lids(ts: TableSet, plan: LidPlan):
    """Per assigned LID (ascending): the LID, its switch, the port at that switch (0 for the
    switch itself), whether it is a host's, the switch or host id, and its layer (LID offset;
    switch LIDs use layer 0)."""
    topo = ts.topo
    n = topo.n_switches
    step = 1 << plan.lmc
    ht = topo.host_table()
    lids = np.concatenate([plan.switch_lid, (plan.host_lid[:, None] + np.arange(step)).ravel()])
    dst = np.concatenate([np.arange(n), np.repeat(ht[:, 1], step)])
    local = np.concatenate([np.zeros(n, dtype=np.int64), np.repeat(ht[:, 2], step)])
    is_host = np.concatenate([np.zeros(n, dtype=bool), np.ones(len(ht) * step, dtype=bool)])
    who = np.concatenate([np.arange(n), np.repeat(ht[:, 0], step)])
    layer = np.concatenate([np.zeros(n, dtype=np.int64), np.tile(np.arange(step), len(ht))])
    return lids, dst, local, is_host, who, layer


def lft_row(topo: Topology, lids, layers, u: int,
            out: np.ndarray | None = None) -> np.ndarray:
    """Switch ``u``'s out port for every LID of ``lids`` (:func:`lft_lids`): layer ``k``'s
    next hop for a LID of offset ``k``; at the LID's own switch its local port (0 for the
    switch's own LID).  The exporter writes these ports and ``fabroute verify`` compares
    the file with them."""
    _, dst, local, _, _, layer = lids
    if out is None:
        out = np.empty(len(dst), dtype=np.intp)
    _lft_ports(layers.nxt, layer, dst, local, u, int(topo.hosts[u]) + 1, out)
    return out


@njit(cache=True)
def _lft_ports(nxt, layer, dst, local, u, first, out):
    """:func:`lft_row` (``first``: the port number of ``u``'s network port 0)."""
    for i in range(dst.shape[0]):
        out[i] = local[i] if dst[i] == u else nxt[layer[i], u, dst[i]] + first


def _lft_chunks(ts: TableSet, plan: LidPlan, names, layers, missing, comments: bool,
                pmap: np.ndarray) -> Chunks:
    topo = ts.topo
    n = topo.n_switches
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = macros("lfts.dump.j2")
    all_lids = lft_lids(ts, plan)
    lids, _, _, is_host, who, _ = all_lids
    # every LID's line once, port 000; per switch only the port digits change
    rows = RowFormats(hp_hex + h_name + sw_hex + sw_name)
    lid, port, guid, name = row_fields(4)
    fields = [(HEX, 4), (DEC, 3), TEXT, TEXT]
    ca = rows.add(m.entry(lid, port, "Channel Adapter", guid, name, comments), fields)
    sw = rows.add(m.entry(lid, port, "Switch", guid, name, comments), fields)
    rows.compile()
    H = topo.n_hosts
    vals = np.stack([lids, np.zeros_like(lids), np.where(is_host, who, 2 * H + who),
                     np.where(is_host, H + who, 2 * H + n + who)], axis=1)
    body, _, at = rows.fill(np.where(is_host, ca, sw), vals, at=1)
    footer = str(m.footer(plan.top)).encode()
    kinds = [f"{k}={kind}" for k, kind in enumerate(layers.kinds)]
    yield str(m.preamble(ts.routing, topo.name(), kinds, missing, plan.lmc, comments))
    ports = np.empty(len(lids), dtype=np.intp)
    for u in range(n):
        # the body is rewritten in place: each chunk is written before the next is made
        put_decimal(body, at, pmap[u][lft_row(topo, all_lids, layers, u, ports)], 3)
        yield str(m.header(plan.top, int(plan.switch_lid[u]), sw_hex[u], sw_name[u])).encode()
        yield memoryview(body)
        yield footer


def _sl2vl_chunks(ts: TableSet, plan: LidPlan, names, layers, binding=None) -> Chunks:
    topo = ts.topo
    n, r = topo.adj.shape
    sw_hex, sw_name, _, hp_hex, h_name = names
    m = macros("sl2vl.dump.j2")
    vl = layers.sl2vl
    vecs, vid = _unique_rows(vl.reshape(-1, vl.shape[-1]))
    vid = vid.reshape(vl.shape[:-1])
    V = len(vecs)
    pm = port_map(topo, binding)
    width = [int(topo.hosts[s]) + r if binding is None else
             int(binding.fabric.switches[binding.switch[s]]["ports"]) for s in range(n)]
    P = max(width, default=0)
    if binding is not None:
        busy: dict[str, set] = {g: set() for g in binding.switch}
        for (a, pa), (b, pb) in binding.fabric.cables:
            busy[a].add(pa)
            busy[b].add(pb)
        for d in binding.fabric.hosts.values():
            busy[d["switch"]].add(d["port"])
        linked = {g: np.array(sorted(v), dtype=np.int64) for g, v in busy.items()}
    # rows as (in * (P + 1) + out) * V + vector id; each distinct row text rendered once
    # (the path scheme has a handful of vectors, the turn scheme up to one per row)
    keys = []
    for s in range(n):
        hs = int(topo.hosts[s])
        # slot of every planned port number: management port 0 and host ports -> 0, net j ->
        # 1 + j; of every port in the files, its planned port's (0 for one the plan has not:
        # a fabric's spare port, where the tables send nothing)
        slot = np.concatenate([np.zeros(hs + 1, dtype=np.int64), 1 + np.arange(r)])
        fslot = np.zeros(width[s] + 1, dtype=np.int64)
        own = pm[s, :hs + r + 1]
        fslot[own[own >= 0]] = slot[own >= 0]
        plan_outs = np.concatenate([np.arange(1, hs + 1),
                                    hs + 1 + np.flatnonzero(topo.adj[s] >= 0)])
        # a fabric's every linked port: OpenSM programs the SL2VL of each, also of the
        # cables the tables route around
        outs = pm[s][plan_outs] if binding is None else linked[binding.switch[s]]
        ins = np.arange(width[s] + 1)
        v = vid[s][fslot[ins][:, None], fslot[outs][None, :]]
        keys.append(((ins[:, None] * (P + 1) + outs[None, :]) * V + v).T.ravel())
    uniq, inv = np.unique(np.concatenate(keys), return_inverse=True)
    vec_list = vecs.tolist()
    rowtab = np.array([str(m.row(int(k // V // (P + 1)), int(k // V % (P + 1)),
                                 vec_list[k % V])) for k in uniq.tolist()], dtype=object)
    yield str(m.preamble(ts.routing, topo.name(), layers.num_sls, layers.scheme))
    foot = str(m.node_footer())
    at = 0
    for s in range(n):
        idx = inv[at:at + len(keys[s])]
        at += len(keys[s])
        yield str(m.node_header("Switch", sw_hex[s], int(plan.switch_lid[s]), sw_name[s]))
        yield "".join(rowtab[idx].tolist())
        yield foot
    # HCAs send on VL 0 whatever the SL
    rows = RowFormats(hp_hex + h_name)
    guid, lid, name = row_fields(3)
    ca = rows.add(str(m.node_header("Channel Adapter", guid, lid, name)) +
                  str(m.row(0, 0, [0] * 16)) + foot, [TEXT, DEC, TEXT])
    rows.compile()
    H = topo.n_hosts
    h = np.arange(H)
    text, _, _ = rows.fill(np.full(H, ca), np.stack([h, plan.host_lid, H + h], axis=1))
    yield memoryview(text)


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the ``uint8[M, 16]`` array ``a`` and each row's index among them
    (np.unique(axis=0) compares the 16 bytes as a record: 30x slower)."""
    key = np.ascontiguousarray(a).view(np.uint64)
    order = np.lexsort(key.T[::-1])
    k = key[order]
    new = np.concatenate([[True], (k[1:] != k[:-1]).any(axis=1)])
    inverse = np.empty(len(a), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return a[order[new]], inverse


def path_sl_rows(sl: np.ndarray, src_guids: list[str],
                 dst_guids: list[str] | None = None) -> list[tuple[str, str, str, int]]:
    """Compact ``sl[src port, dst port, LMC offset]`` into first-match-wins rows
    ``(src, dst, offset, sl)`` with ``*`` wildcards: per-path exceptions (``offset`` ``*``
    when all offsets agree) first, then one ``* dst * sl`` row per destination whose paths
    all agree but differ from the most common SL, then ``* * * <most common SL>``.
    ``dst_guids`` defaults to ``src_guids``."""
    dst_guids = src_guids if dst_guids is None else dst_guids
    sl = np.asarray(sl)
    if sl.size == 0:
        return [("*", "*", "*", 0)]
    default = int(np.bincount(sl.ravel()).argmax())
    rows: list[tuple[str, str, str, int]] = []
    by_dst = []
    for d in range(sl.shape[1]):
        col = sl[:, d, :]
        first = int(col.flat[0])
        if (col == first).all():
            if first != default:
                by_dst.append(("*", dst_guids[d], "*", first))
            continue
        major = int(np.bincount(col.ravel()).argmax())
        if major != default:
            by_dst.append(("*", dst_guids[d], "*", major))
        for src in np.flatnonzero((col != major).any(axis=1)).tolist():
            offs = col[src]
            if (offs == offs[0]).all():
                rows.append((src_guids[src], dst_guids[d], "*", int(offs[0])))
            else:
                rows += [(src_guids[src], dst_guids[d], str(k), int(v))
                         for k, v in enumerate(offs.tolist()) if v != major]
    return rows + by_dst + [("*", "*", "*", default)]


def host_path_sls(layers) -> np.ndarray:
    """``uint8[H, H + N, 2**lmc]``: the SL of every (source host, destination port, LID
    offset); destination ports are the hosts, then the switches (port 0, LMC 0: layer 0's
    route, the same SL on every offset)."""
    topo = layers.ts.topo
    sw = topo.host_table()[:, 1]
    to_hosts = layers.sl[:, sw[:, None], sw[None, :]].transpose(1, 2, 0)
    to_switches = np.repeat(layers.sl[0][sw][:, :, None], layers.num_layers, axis=2)
    return np.concatenate([to_hosts, to_switches], axis=1)


def _path_sl_chunks(ts: TableSet, plan: LidPlan, names, layers) -> Chunks:
    sw_hex, _, _, hp_hex, _ = names
    groups, matrix = [], []
    if layers.num_sls == 1:
        rows = [("*", "*", "*", 0)]       # never materialise H^2 zeros
    elif layers.info.get("variant") in (CLIMB, PHASE):
        # an SL per switch pair: the matrix (N^2 digits) instead of per-path lines (H (H + N))
        rows = []
        groups, matrix = path_sl_matrix(layers, ["0x" + g for g in hp_hex],
                                        ["0x" + g for g in sw_hex])
    else:
        guids = ["0x" + g for g in hp_hex]
        rows = path_sl_rows(host_path_sls(layers), guids, guids + ["0x" + g for g in sw_hex])
    return rendered(template_env().get_template("path-sl.txt.j2"), routing=ts.routing,
                     topology=ts.topo.name(), lmc=plan.lmc, rows=rows, groups=groups,
                     matrix=matrix)


def path_sl_matrix(layers, host_guids: list[str], switch_guids: list[str]):
    """``path-sl.txt``'s SL matrix of LMC-0 ``layers``: every port in the group of its switch
    (an HCA's, or the switch's own), and per source switch one hex digit per destination
    switch — ``(groups, rows)`` for the template."""
    sl = layers.sl[0]
    sw = layers.ts.topo.host_table()[:, 1]
    groups = list(zip(host_guids, sw.tolist())) + [(g, k) for k, g in enumerate(switch_guids)]
    text = _HEX_DIGITS[sl]
    return groups, [(k, text[k].tobytes().decode("ascii")) for k in range(len(sl))]


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
