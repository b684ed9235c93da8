"""An OpenFlow 1.3 pipeline interpreter for the subset of ``ovs-ofctl`` syntax fabroute emits
(tuple-space lookup per table, the handful of actions the exporter writes), shared by the
tests that execute exported or derived programs."""

from __future__ import annotations

import re

from tablegen.exports.openflow import T_CHOICE

FLOW = re.compile(r"^table=(\d+),priority=(\d+)(?:,(.*?))?,actions=(.*)$")


def split_top(s: str) -> list[str]:
    """Split at commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return out + [cur] if cur else out


def mac_int(s: str) -> int:
    return int(s.replace(":", ""), 16)


def ip_int(s: str) -> int:
    a, b, c, d = (int(x) for x in s.split("."))
    return a << 24 | b << 16 | c << 8 | d


class Switch:
    """Flow tables of one switch as tuple spaces: per table, per match shape, a dict."""

    def __init__(self, flows_text: str, groups_text: str | None, dead=()):
        self.tables: dict[int, dict[tuple, dict]] = {}
        self.ff: set[int] = set()        # FAST_FAILOVER groups: buckets are (watch port, ...)
        self.dead = set(dead)            # ports whose link is down
        for line in flows_text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = FLOW.match(line)
            assert m, line
            table, prio = int(m.group(1)), int(m.group(2))
            shape, key = [], []
            for f in split_top(m.group(3) or ""):
                name, val = f.split("=")
                if name == "dl_dst":
                    v, _, mask = val.partition("/")
                    mask = mac_int(mask) if mask else (1 << 48) - 1
                    shape.append(("dl_dst", mask))
                    key.append(mac_int(v) & mask)
                elif name in ("nw_src", "nw_dst"):
                    v, _, mask = val.partition("/")
                    mask = ip_int(mask) if mask else (1 << 32) - 1
                    shape.append((name, mask))
                    key.append(ip_int(v) & mask)
                else:
                    v, _, mask = val.partition("/")
                    mask = int(mask, 0) if mask else None
                    shape.append((name, mask))
                    key.append(int(v, 0) & (mask if mask is not None else -1))
            space = self.tables.setdefault(table, {}).setdefault(tuple(shape), {})
            k = tuple(key)
            assert k not in space or space[k][0] != prio, f"ambiguous flows: {line}"
            if k not in space or space[k][0] < prio:
                space[k] = (prio, split_top(m.group(4)))
        self.groups = {}
        for line in (groups_text or "").splitlines():
            if not line or line.startswith("#"):
                continue
            head, *buckets = line.split(",bucket=")
            gid = int(re.search(r"group_id=(\d+)", head).group(1))
            assert "type=select" in head or "type=ff" in head
            parsed = []
            for b in buckets:
                w, _, acts = b.partition(",actions=")
                parsed.append((int(w.split(":")[1]), split_top(acts)))
            self.groups[gid] = parsed
            if "type=ff" in head:
                self.ff.add(gid)

    def lookup(self, table: int, pkt: dict):
        best = None
        for shape, space in self.tables.get(table, {}).items():
            key = []
            for name, mask in shape:
                if name == "in_port":
                    key.append(pkt["in_port"])
                elif name == "dl_vlan":
                    key.append(0xFFFF if pkt["vlan"] is None else pkt["vlan"][0])
                elif name == "dl_vlan_pcp":
                    if pkt["vlan"] is None:
                        break
                    key.append(pkt["vlan"][1])
                elif name == "metadata":
                    key.append(pkt["metadata"])
                elif name == "dl_dst":
                    key.append(pkt["dst"] & mask)
                elif name == "vlan_tci":            # a VLAN tag is present (+ version bit)
                    if pkt["vlan"] is None:
                        break
                    key.append((0x1000 | pkt["vlan"][0]) & mask)
                elif name in ("dl_type", "nw_proto", "tp_src", "nw_src", "nw_dst"):
                    if name not in pkt:
                        break
                    key.append(pkt[name] & (mask if mask is not None else -1))
                else:
                    raise AssertionError(f"unexpected match field {name}")
            else:
                hit = space.get(tuple(key))
                if hit and (best is None or hit[0] > best[0]):
                    best = hit
        return None if best is None else best[1]


def run_actions(sw: Switch, actions, pkt, pick, outputs, table=None):
    for a in actions:
        if a.startswith("goto_table:"):
            run_table(sw, int(a.split(":")[1]), pkt, pick, outputs)
        elif a.startswith("resubmit(,"):
            run_table(sw, int(a[len("resubmit(,"):-1]), pkt, pick, outputs)
        elif a == "push_vlan:0x8100":
            assert pkt["vlan"] is None
            pkt["vlan"] = [0, 0]
        elif a == "pop_vlan":
            pkt["vlan"] = None
        elif a.startswith("set_field:"):
            val, field = a[len("set_field:"):].split("->")
            if field == "vlan_vid":
                assert int(val) & 0x1000, "OpenFlow 1.3 needs OFPVID_PRESENT"
                pkt["vlan"][0] = int(val) & 0xFFF
                if table == CHOICE_TABLE:
                    # phase-0 target t is VID 1 + t (+ 1 in the standard profile, which
                    # uses no VID 0: Plan.vid_base)
                    pkt["chosen"].append(pkt["vlan"][0] - 1 - pkt.get("vid_base", 0))
            else:
                assert field == "vlan_pcp"
                pkt["vlan"][1] = int(val)
        elif a.startswith("write_metadata:"):
            pkt["metadata"] = int(a.split(":")[1], 0)
        elif a.startswith("set_queue:"):
            pkt["queue"] = int(a.split(":")[1])
        elif a.startswith("group:"):
            gid = int(a.split(":")[1])
            buckets = sw.groups[gid]
            if gid in sw.ff:        # the first bucket whose watched port is up; none: drop
                live = [b for b in buckets if b[0] not in sw.dead]
                if live:
                    run_actions(sw, live[0][1], pkt, pick, outputs)
            else:
                run_actions(sw, buckets[pick(buckets)][1], pkt, pick, outputs)
        elif a.startswith("output:") or a == "in_port":
            port = pkt["in_port"] if a == "in_port" else int(a.split(":")[1])
            if a != "in_port" and port == pkt["in_port"]:
                continue        # OpenFlow: output to the ingress port by number is dropped
            outputs.append((port, dict(pkt, vlan=pkt["vlan"] and list(pkt["vlan"]))))
        else:
            raise AssertionError(f"unexpected action {a}")


def run_table(sw, table, pkt, pick, outputs):
    actions = sw.lookup(table, pkt)
    assert actions is not None, f"table-miss in table {table} for {pkt}"
    run_actions(sw, actions, pkt, pick, outputs, table)


CHOICE_TABLE = T_CHOICE


def bucket_target(bucket) -> int:
    vid = next(int(a.split(":")[1].split("->")[0]) for a in bucket[1] if a.endswith("->vlan_vid"))
    return (vid & 0xFFF) - 1
