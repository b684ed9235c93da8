"""Write the OpenFlow 1.3 program of a table set as ``ovs-ofctl`` text: ``openflow/s<id>.flows``
(and ``s<id>.groups`` for routings with a source choice) per switch and
``openflow/manifest.json``.  The program itself is :func:`tablegen.exports.openflow.plan`;
the MAC, VLAN and PCP plans are in ``docs/formats.md``.
"""

from __future__ import annotations

import numpy as np

from tablegen.exports import openflow as of
from tablegen.exports.writer import (
    DEC,
    HEX,
    TEXT,
    Chunks,
    Job,
    RowFormats,
    around,
    interleave,
    json_chunks,
    put_decimal,
    row_fields,
    run_jobs,
    template_env,
)
from tablegen.tables import TableSet

OF_CHUNK_ROWS = 1 << 17         # flow entries formatted at a time (about 16 MB of text)


def plan_openflow(ts: TableSet, profile: str = "ovs") -> list[Job]:
    """The files of the OpenFlow program of ``ts`` in ``profile`` (one of
    :data:`tablegen.exports.openflow.PROFILES`), as jobs."""
    p = of.plan(ts, profile=profile)
    n = ts.topo.n_switches
    width = max(4, len(str(n - 1)))
    text = _OfText(p, width)
    jobs: list[Job] = []
    for u in range(n):
        name = f"openflow/s{u:0{width}d}"
        jobs.append((name + ".flows", lambda u=u: text.flows(u)))
        if text.grouped:
            jobs.append((name + ".groups", lambda u=u: text.groups(u)))
    jobs.append(("openflow/manifest.json", lambda: json_chunks(_of_manifest(p, width))))
    return jobs


def export_openflow(ts: TableSet, outdir, profile: str = "ovs") -> list[str]:
    """Write ``outdir/openflow/s<id>.flows`` (+ ``.groups``) and ``manifest.json``."""
    return run_jobs(outdir, plan_openflow(ts, profile))


class _OfText:
    """The ``.flows`` and ``.groups`` files of every switch: the entries and groups of
    :func:`tablegen.exports.openflow.program` in its order, built as arrays for a chunk of switches
    at a time (program() makes one Python record per entry: minutes for the 8M entries of a
    Slim Fly q = 19 VAL).  Files are asked for in switch order; each chunk's text lives until
    the next chunk is made."""

    def __init__(self, p, width: int):
        topo = p.ts.topo
        self.p, self.width = p, width
        self.std = p.profile == "standard"
        self.grouped = p.choice is not None and not self.std     # a .groups file per switch
        n, H = topo.n_switches, topo.n_hosts
        self.sw_str, self.grp_str = H, H + n          # where the string table's parts start
        self.rows = RowFormats(p.host_mac + p.sw_prefix + p.grp_prefix)
        tables = {"t_ingress": of.T_INGRESS, "t_decide": of.T_DECIDE, "t_choice": of.T_CHOICE,
                  "t_arrive": of.T_ARRIVE,
                  "t_tagged": of.T_ARRIVE if p.decide is None else of.T_DECIDE,
                  "t_fwd": of.T_FWD, "t_egress": of.T_EGRESS, "versions": p.versions,
                  "vid0": of.OFPVID_PRESENT | p.vid_base,
                  # tagged frames (of program version 0: of.versioned)
                  "tagged": "vlan_tci=0x1000/0x%04x" % (of.OFPVID_PRESENT | (
                      of.VERSION_BIT if p.versions else 0))}
        m = template_env().get_template("openflow.flows.j2").make_module(tables)
        self.groups_m = template_env().get_template("openflow.groups.j2").make_module(tables)
        self.flows_file = m.file
        add, a, b, c, d = self.rows.add, *row_fields(4)
        D, X, T = DEC, HEX, TEXT
        ing = p.ingress
        cpcp = p.choice.vc_base if p.choice is not None else 0    # the choice's first VC
        self.f = {
            "to_host": add(m.to_host(a, b), [T, D]),
            "tag": add(m.tag(a, ing["pcp"], None if ing["choice"] else
                             of.OFPVID_PRESENT | (ing["vid"] + p.vid_base)), [D]),
            "from_switch": add(m.from_switch(a), [D]),
            "choice_group": add(m.choice_group(), []),
            "choice_default": add(m.choice_default(a, cpcp), [D]),
            "arrive": add(m.arrive(a), [D]),
            "on_path": add(m.on_path(a, b), [D, T]),
            "arrive_miss": add(m.arrive_miss(), []),
            "deliver": add(m.deliver(a, b, c), [D, T, D]),
            "egress": add(m.egress(a, b, c), [D, D, D]),
            "egress_back": add(m.egress_back(a, b, c), [D, D, D]),
            "egress_vc": add(m.egress_vc(a, b, c, d), [D, D, D, D]),
            "egress_back_vc": add(m.egress_back_vc(a, b, c, d), [D, D, D, D]),
        }
        for leave in (False, True):
            self.f["to_group", leave] = add(m.to_group(a, b, leave, c), [D, T, D])
            self.f["to_switch", leave] = add(m.to_switch(a, b, leave, c), [D, T, D])
            self.f["to_target", leave] = add(m.to_target(a, leave, b), [D, D])
            self.f["to_group_vc", leave] = add(m.to_group_vc(a, b, leave, c, d), [D, T, D, D])
            self.f["to_switch_vc", leave] = add(m.to_switch_vc(a, b, leave, c, d), [D, T, D, D])
            self.f["to_target_vc", leave] = add(m.to_target_vc(a, leave, b, c), [D, D, D])
        dec = p.decide
        if dec is not None:
            mask = of.GROUP_MASK if dec["keys"] == "group" else of.SWITCH_MASK
            self.f["decide"] = (add(m.decide_ip(*row_fields(6), mask),
                                    [D, T, D, D, D, D]) if self.std else
                                add(m.decide(*row_fields(4), mask), [D, T, X, X]))
            self.f["decide_miss"] = add(m.decide_miss(), [])
        self.rows.compile()
        # buffers of their own: their text is written with the flows'
        self.bucket_rows, self.choice_rows = RowFormats([]), RowFormats([])
        if p.choice is not None:
            self.f["bucket"] = self.bucket_rows.add(self.groups_m.bucket(a, b, p.choice.vc_base),
                                                    [D, D])
            self.bucket_rows.compile()
            self.f["choice"] = (self.choice_rows.add(m.choice_ip(*row_fields(5), cpcp), [D] * 5)
                                if self.std else
                                self.choice_rows.add(m.choice(*row_fields(4), cpcp),
                                                     [D, X, X, D]))
            self.choice_rows.compile()
        self._slots: dict[bytes, tuple[int, np.ndarray]] = {}
        self._choice_text: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._choice_buf = np.empty(0, dtype=np.uint8)
        self._chunk: tuple[int, int, dict] = (0, 0, {})
        r = topo.radix
        per_switch = (3 * int(topo.hosts.max(initial=0)) + r * (1 + 2 * p.V)
                      + n * (1 + len(p.phase_tables) + len(p.vid_targets)) * (
                          p.V if self.std else 1)
                      + (len(p.on_path[0]) // n if p.on_path else 0)
                      + (2 * n * (p.decide["bits"] + 1) + 1 if p.decide else 0))
        self.chunk = max(1, OF_CHUNK_ROWS // per_switch)

    def flows(self, u: int) -> Chunks:
        p = self.p
        head, tail = around(self.flows_file, u, f"{of.dpid(u):016x}", p.ts.routing,
                             p.ts.topo.name(), p.V,
                             f"s{u:0{self.width}d}.groups" if self.grouped else None)
        u0, _, text = self._text(u)
        buf, start, mid, choice = text["flows"]
        i = u - u0
        view = memoryview(buf)
        return (head, view[start[i]:mid[i]], *self._choice_rows(*choice[i]),
                view[mid[i]:start[i + 1]], tail)

    def groups(self, u: int) -> Chunks:
        p = self.p
        head, tail = around(self.groups_m.file, u, f"{of.dpid(u):016x}", p.ts.routing,
                             p.ts.topo.name(), p.choice.name)
        u0, _, text = self._text(u)
        buf, start, _ = text["groups"]
        return head, memoryview(buf)[start[u - u0]:start[u - u0 + 1]], tail

    def _text(self, u: int) -> tuple[int, int, dict]:
        """The chunk of switches holding ``u``: first and last + 1 switch, and per kind its
        text (see :meth:`_make`)."""
        u0, u1, _ = self._chunk
        if not u0 <= u < u1:
            u0, u1 = u, min(self.p.ts.topo.n_switches, u + self.chunk)
            self._chunk = u0, u1, self._make(u0, u1)
        return self._chunk

    def _make(self, u0: int, u1: int) -> dict:
        """Text of switches ``u0 .. u1 - 1``: the flows' bytes, where each switch's part
        starts and where its source-choice entries go, and those entries per switch (layout
        and VIDs); the groups' bytes and where each switch's part starts."""
        flows, choice, buckets = self._blocks(u0, u1)
        split = 3 if self.p.decide is None else 5      # the blocks of tables 0 and 1 first
        text = {"flows": (*interleave(self.rows, flows, u0, u1, split), choice)}
        if buckets:
            text["groups"] = interleave(self.bucket_rows, buckets, u0, u1)
        return text

    def _choice_rows(self, key: bytes | None = None, vid=None) -> tuple:
        """A switch's source-choice entries: those of the first switch with the same slots
        (``key``), formatted once, with the VIDs ``vid`` written over theirs — 8M of a Slim
        Fly q = 19 VAL export's 9M entries.  ``vlan_vid`` values are 0x1000 | VID, VID <=
        4094: always four digits."""
        if key is None:
            return ()
        if key not in self._choice_text:
            bits, _ = self._slots[key]
            if self.std:        # ipv4_dst=0.0.hi.lo/0.0.hi.lo: at most CHOICE_BITS_MAX bits
                slot, mask = np.arange(len(vid)), (1 << bits) - 1
                args = np.stack([slot >> 8, slot & 0xFF, np.full(len(vid), mask >> 8),
                                 np.full(len(vid), mask & 0xFF), vid], axis=1)
            else:
                S = len(vid) // 2
                args = np.stack([np.repeat([of.IPPROTO_UDP, of.IPPROTO_TCP], S),
                                 np.tile(np.arange(S), 2), np.full(2 * S, (1 << bits) - 1),
                                 vid], axis=1)
            text, _, at = self.choice_rows.fill(np.full(len(vid), self.f["choice"]), args,
                                                at=args.shape[1] - 1)
            self._choice_text[key] = text.copy(), at
        text, at = self._choice_text[key]
        if len(self._choice_buf) < len(text):
            self._choice_buf = np.empty(len(text), dtype=np.uint8)
        out = self._choice_buf[:len(text)]
        out[:] = text
        put_decimal(out, at, vid, 4)
        return (memoryview(out),)

    def _blocks(self, u0: int, u1: int):
        """The rows of :func:`tablegen.exports.openflow.program` for switches ``u0 .. u1 - 1``, block
        by block in its order, but for the source choice's (after the first three blocks):
        per switch its slot layout and VIDs (:meth:`_choice_rows`); and the groups'
        buckets."""
        p, f = self.p, self.f
        ts, topo = p.ts, p.ts.topo
        n, G = topo.n_switches, topo.n_groups
        grp = topo.group.astype(np.int64)
        pn = topo.hosts.astype(np.int64) + 1          # port number of network index 0
        sws = np.arange(u0, u1)
        off = topo.host_offset
        h = np.arange(off[u0], off[u1])
        hsw = np.repeat(sws, topo.hosts[u0:u1])
        hport = h - off[hsw] + 1
        ns, nj = np.nonzero(topo.adj[u0:u1] >= 0)
        ns += u0
        blocks, buckets = [], []
        vb = p.vid_base                               # added to every VID (Plan.vid_base)

        def put(sw, fmt, *cols):
            blocks.append((sw, fmt, cols))

        V = p.V

        def to_port(sw, kind, leave, *cols):
            """A forwarding block; in the standard profile each row once per VC, the VC in
            the metadata (of.vc_in_metadata)."""
            if not self.std:
                put(sw, np.where(leave, f[kind, True], f[kind, False]), *cols)
                return
            v = np.tile(np.arange(V), len(sw))
            put(np.repeat(sw, V), np.repeat(np.where(leave, f[kind + "_vc", True],
                                                     f[kind + "_vc", False]), V),
                *[np.repeat(c, V) for c in cols[:-1]], v,
                np.repeat(cols[-1], V) | v << of.VC_SHIFT)

        # 0 ingress
        put(hsw, f["to_host"], h, hport)
        put(hsw, f["tag"], hport)
        put(ns, f["from_switch"], pn[ns] + nj)
        if p.decide is not None:
            put(*self._decisions(sws))
            put(sws, f["decide_miss"])
        # 2 source choice
        bk = {}
        for c in {id(c): c for c in [p.choice, *p.vid_targets] if c is not None}.values():
            if c is p.choice or c.inter == "switch-3h":
                bk[c.name] = [of.buckets(p, u, c) for u in range(u0, u1)]
        choice = [()] * (u1 - u0)
        if p.choice is not None:
            choice, (t, w) = self._choice(bk[p.choice.name])
            if self.std:
                first = np.array([x[0] for x in t])        # non-IPv4 takes the first target
                put(sws, f["choice_default"], of.OFPVID_PRESENT | (1 + vb + first))
            else:
                put(sws, f["choice_group"])
                buckets.append((np.repeat(sws, [len(x) for x in t]), f["bucket"],
                                (np.concatenate(w),
                                 of.OFPVID_PRESENT | (1 + vb + np.concatenate(t)))))
        # 2 phase exit
        for c in p.vid_targets:
            if c.exit in ("reach", "on_path"):
                put(sws, f["arrive"], 1 + vb + (sws if c.target0 == "switch" else grp[sws]))
            if c.exit == "on_path" and p.on_path is not None:
                ou, oi, od = p.on_path
                lo, hi = np.searchsorted(ou, [u0, u1])
                keep = oi[lo:hi] != ou[lo:hi]
                put(ou[lo:hi][keep].astype(np.int64), f["on_path"], 1 + vb + oi[lo:hi][keep],
                    self.sw_str + od[lo:hi][keep])
        put(sws, f["arrive_miss"])
        # 3 forwarding
        for vid in p.deliver_vids:
            put(hsw, f["deliver"], np.full(len(h), vid + vb), h, hport)
        for vid, use, maj, er, ec, split, table, leave in p.phase_tables:
            s, g = np.nonzero(use[u0:u1])
            s += u0
            j = maj[s, g]
            lv = leave[s, j] if leave is not None else np.zeros(len(s), dtype=bool)
            to_port(s, "to_group", lv, np.full(len(s), vid + vb), self.grp_str + g, pn[s] + j)
            s, d = er[split[u0]:split[u1]], ec[split[u0]:split[u1]]
            j = table[s, d].astype(np.int64)
            lv = leave[s, j] if leave is not None else np.zeros(len(s), dtype=bool)
            to_port(s, "to_switch", lv, np.full(len(s), vid + vb), self.sw_str + d, pn[s] + j)
        for c in p.vid_targets:
            if c.inter == "switch-3h":
                s = np.repeat(sws, [len(b) for b in bk[c.name]])
                t = np.array([x[0] for b in bk[c.name] for x in b], dtype=np.int64)
            elif c.target0 == "group":
                s, t = np.nonzero(np.arange(G)[None, :] != grp[sws][:, None])
                s += u0
            else:
                s, t = np.nonzero(np.arange(n)[None, :] != sws[:, None])
                s += u0
            j = ts.tables[c.table0][s, t].astype(np.int64)
            lv = (np.ones(len(s), dtype=bool) if c.exit == "first_hop" else
                  ts.exit_port[s, j] if c.exit == "port" else np.zeros(len(s), dtype=bool))
            to_port(s, "to_target", lv, 1 + vb + t, pn[s] + j)
        # 4 egress: per port and VC, the back-out entry right after (Valiant phase 0 only)
        K = 2 if p.vid_targets else 1
        s = np.repeat(ns, V * K)
        port = np.repeat(pn[ns] + nj, V * K)
        v = np.tile(np.repeat(np.arange(V), K), len(ns))
        nv = np.minimum(v + np.repeat(ts.vc_inc[ns, nj].astype(np.int64), V * K), V - 1)
        back = np.tile(np.arange(K), len(ns) * V) == 1
        if self.std:                        # the VC in the metadata (of.vc_in_metadata)
            meta = port | v << of.VC_SHIFT
            put(s, np.where(back, f["egress_back_vc"], f["egress_vc"]), np.where(back, port, meta),
                np.where(back, meta, v),
                np.where(back, v, nv), np.where(back, nv, port))
        else:
            put(s, np.where(back, f["egress_back"], f["egress"]), port, v, nv)
        return blocks, choice, buckets

    def _decisions(self, sws: np.ndarray) -> tuple:
        """UGAL-L's decision rows of switches ``sws`` in :func:`~tablegen.exports.openflow.
        decision_flows` order (key, then UDP and TCP, then share block), all minimal."""
        d, topo = self.p.decide, self.p.ts.topo
        group = d["keys"] == "group"
        own = topo.group.astype(np.int64)[sws] if group else sws
        K = topo.n_groups if group else topo.n_switches
        s, k = np.nonzero(np.arange(K)[None, :] != own[:, None])
        value, mask = (np.array(x, dtype=np.int64) << d["shift"] for x in zip(*d["blocks"]))
        per = 2 * len(d["blocks"])
        rows = len(s) * per
        bits = ((value >> 8, value & 0xFF, mask >> 8, mask & 0xFF) if self.std
                else (value, mask))           # standard: nw_src=0.0.hi.lo/0.0.hi.lo
        return (np.repeat(sws[s], per), self.f["decide"],
                np.tile(np.repeat([of.IPPROTO_UDP, of.IPPROTO_TCP], len(d["blocks"])), len(s)),
                np.repeat((self.grp_str if group else self.sw_str) + k, per),
                *(np.resize(b, rows) for b in bits))

    def _choice(self, bks) -> tuple:
        """Per switch (buckets ``bks``): its source-choice slot layout (the key of
        ``self._slots``) and VIDs, UDP then TCP; and the buckets' targets and weights."""
        tw = [np.array(b, dtype=np.int64).reshape(-1, 2) for b in bks]
        same: dict[bytes, list[int]] = {}
        for i, x in enumerate(tw):
            same.setdefault(x[:, 1].tobytes(), []).append(i)
        choice: list = [None] * len(bks)
        for key, members in same.items():
            if key not in self._slots:
                bits, owner = of.choice_slots(tw[members[0]][:, 1].tolist())
                self._slots[key] = bits, np.array(owner, dtype=np.int64)
            owner = self._slots[key][1]
            t = np.stack([tw[i][:, 0] for i in members])
            vid = np.tile(of.OFPVID_PRESENT | (1 + self.p.vid_base + t[:, owner]),
                          1 if self.std else 2)
            for k, i in enumerate(members):
                choice[i] = key, vid[k]
        return choice, ([x[:, 0] for x in tw], [x[:, 1] for x in tw])


def _of_manifest(p, width: int) -> dict:
    ts, topo = p.ts, p.ts.topo
    n = topo.n_switches
    rank = of.group_rank(topo)
    return {
        "format": "fabroute-openflow", "version": 2, "routing": ts.routing,
        "topology": topo.name(), "openflow": "1.3", "vcs": p.V,
        "tables": {"ingress": of.T_INGRESS, "decide": of.T_DECIDE, "choice": of.T_CHOICE,
                   "phase_exit": of.T_ARRIVE, "forward": of.T_FWD, "egress": of.T_EGRESS},
        "ingress": {"class": ts.classes[0].name, **p.ingress},
        "choice_class": None if p.choice is None else p.choice.name,
        "profile": p.profile,
        "mac_layout": "02:GG:GG:LL:LL:EE (group, rank in group, host index)",
        "masks": {"group": of.GROUP_MASK, "switch": of.SWITCH_MASK},
        "switches": [{"id": s, "dpid": f"{of.dpid(s):016x}", "group": int(topo.group[s]),
                      "rank": int(rank[s]), "mac_prefix": p.sw_prefix[s],
                      "flows": f"s{s:0{width}d}.flows",
                      "groups": (f"s{s:0{width}d}.groups" if p.choice and p.profile == "ovs"
                                 else None)}
                     for s in range(n)],
        "hosts": [{"id": h, "switch": s, "port": q, "mac": p.host_mac[h]}
                  for h, s, q in topo.host_table().tolist()],
    }


# -- one record as text (the controller's records, for tests and tools) -----------------------
def _ofctl_match(match: tuple) -> list[str]:
    out = []
    for k, v in match:
        if k == "vlan_vid" and isinstance(v, tuple):    # tagged (with a version bit)
            out.append(f"vlan_tci=0x{v[0]:04x}/0x{v[1]:04x}")
        elif k == "vlan_vid":
            out.append(f"dl_vlan={v & 0xFFF}" if v & of.OFPVID_PRESENT else "dl_vlan=0xffff")
        elif k == "eth_dst":
            out.append(f"dl_dst={v[0]}/{v[1]}" if isinstance(v, tuple) else f"dl_dst={v}")
        elif k == "vlan_pcp":
            out.append(f"dl_vlan_pcp={v}")
        elif k == "eth_type":
            out.append(f"dl_type=0x{v:04x}")
        elif k == "ip_proto":
            out.append(f"nw_proto={v}")
        elif k in ("udp_src", "tcp_src"):
            out.append(f"tp_src=0x{v[0]:x}/0x{v[1]:x}")
        elif k in ("ipv4_src", "ipv4_dst"):
            out.append(f"nw_{k[5:]}={v[0]}/{v[1]}")
        else:
            out.append(f"{k}={v}")
    return out


def _ofctl_action(a: tuple) -> str:
    kind = a[0]
    if kind == "push_vlan":
        return f"push_vlan:0x{a[1]:04x}"
    if kind == "set_field":
        return f"set_field:{a[2]}->{a[1]}"
    if kind == "output":
        return "in_port" if a[1] == "in_port" else f"output:{a[1]}"
    if kind == "goto_table":
        return f"goto_table:{a[1]}"
    if kind == "resubmit":
        return f"resubmit(,{a[1]})"
    if kind == "pop_vlan":
        return "pop_vlan"
    return f"{kind}:{a[1]}"           # set_queue, group, write_metadata


def ofctl_flow(f: of.Flow) -> str:
    """The flow in ``ovs-ofctl add-flows`` syntax."""
    head = [f"table={f.table}", f"priority={f.priority}"] + _ofctl_match(f.match)
    return ",".join(head) + ",actions=" + ",".join(_ofctl_action(a) for a in f.actions)


def ofctl_group(g: of.Group) -> str:
    """The group in ``ovs-ofctl add-groups`` syntax (one line)."""
    head = "watch_port" if g.kind == "ff" else "weight"
    return f"group_id={g.group_id},type={g.kind}" + "".join(
        f",bucket={head}:{w},actions=" + ",".join(_ofctl_action(a) for a in acts)
        for w, acts in g.buckets)
