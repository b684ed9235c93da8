"""Live table updates on a running subnet: OpenSM on ibsim moves from one table set (OLD) to
another (NEW) of the same fabric grown (new switches and hosts, new cables) or degraded
(failed links), by one heavy re-sweep, and what the switches then hold is read back.

``update(OLD, NEW)``:

1. reads both sets (:func:`tablegen.exports.infiniband.read.load_ib_files`) and diffs their
   wiring (``fabric.net``): nodes added, cables added, cables removed.  Nodes cannot go away
   and a port cannot change its peer (exit 2, nothing started);
2. writes a *live* copy of NEW whose LIDs are OLD's for every port OLD has: NEW's own plan
   numbers switches ``1..N`` and hosts after them, so growing by 8 switches would move every
   host's LID, which a live subnet never does (OpenSM keeps a port's LID; QPs and path
   records in use hold them).  New ports take the LIDs above OLD's top (switches, then hosts
   aligned to ``2^LMC``).  Only LIDs change: entries, SL2VL rows and path SLs are NEW's;
3. starts ibsim with its console on a pipe, on a net file holding every node of NEW but only
   OLD's cables (ibsim cannot add nodes at run time: the new cabinet stands uncabled), and
   OpenSM (engine ``fabroute``) on OLD's files with ``guid2lid`` seeded with the live LIDs
   (OpenSM reads guid2lid only at start) and ``sweep_on_trap FALSE``;
4. reads everything back (:func:`emulation.ibsim.apply.read_back`): OLD must hold exactly;
5. the update: ibsim console ``Unlink`` / ``Link`` per removed / added cable (link-state
   traps reach OpenSM, which does not sweep on them), the live files replaced atomically at
   the paths OpenSM was started with (``-U`` file; the plugin's directory, which it re-reads
   when a file changed), then ``kill -HUP`` (a forced heavy sweep) until the next
   ``SUBNET UP``;
6. reads everything back against the live NEW files, diffs the LFTs read before and after
   (entries OpenSM changed on old switches, entries added for new LIDs, the new switches'
   tables) against the diff of the files, and walks every (source, LID) pair through the
   LFTs read back over NEW's wiring.

``docs/infiniband.md``, *Live updates: growth and link failures*, has the commands and figures.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from emulation.ibsim import apply as ib
from emulation.ibsim.discover import ibnetdiscover
from tablegen.durable import atomic_write
from tablegen.errors import BadInput, RunFailed
from tablegen.exports.outdir import check_out_file
from tablegen.exports.infiniband.limits import MAX_UNICAST_LID, NO_PORT
from tablegen.exports.infiniband.read import IbFiles, LftTable, load_ib_files
from tablegen.limits import paths_option
from tablegen.output import emit

FIRST_CHANGES = 20            # changed LFT entries listed in the report
KINDS = ("added", "changed", "removed")     # of an LFT entry that differs (lft_changes)
SWEEP_FAIL = ("Errors during initialization", "fabroute_osm: ERROR")
SETTLE_S = 1.0               # trap-driven sweeps: quiet log for this long = done
SIM_ERRORS = ("not found", "bad port", "can't", "is not linked", "unknown", "bad parameter",
              "no previous link", "no local port", "no remote port")


# -- what changes in the fabric ------------------------------------------------------------------
def _cables(f: IbFiles) -> set[tuple[int, int, int, int]]:
    """Every cable of ``fabric.net`` once: ``(guid, port, peer guid, peer port)``, ends
    ordered."""
    out = set()
    for g, (_, ports) in f.net.items():
        for p, (h, q) in ports.items():
            out.add((g, p, h, q) if (g, p) < (h, q) else (h, q, g, p))
    return out


def _names(f: IbFiles) -> dict[int, str]:
    """Node GUID (switch GUID, HCA node GUID) -> ibsim node id."""
    out = {int(s["guid"], 16): s["name"] for s in f.guids["switches"]}
    out.update((int(h["node_guid"], 16), h["name"]) for h in f.guids["hosts"])
    return out


def fabric_diff(old: IbFiles, new: IbFiles) -> dict:
    """Nodes and cables NEW adds or drops, and the ports whose cable leads elsewhere in NEW
    (a re-plugged cable: removed, then added).  :class:`BadInput` when the fabrics are of two
    kinds, the LMCs differ or a node of OLD is gone."""
    kinds = [str(f.guids.get("topology", "")).split(":")[0] for f in (old, new)]
    if kinds[0] != kinds[1]:
        raise BadInput(f"OLD is a {kinds[0]} fabric ({old.guids.get('topology')}) and NEW a "
                       f"{kinds[1]} ({new.guids.get('topology')}); expected NEW to be OLD "
                       f"grown or degraded")
    if old.lmc != new.lmc:
        raise BadInput(f"OLD has LMC {old.lmc} and NEW LMC {new.lmc}: a live update keeps the "
                       f"LMC (every host's LID block); export both with the same --lmc")
    gone = sorted(old.net.keys() - new.net.keys())
    if gone:
        raise BadInput(f"node {_names(old)[gone[0]]} of OLD is not in NEW ({len(gone)} nodes): "
                       f"a live update adds switches and cables or removes cables, never nodes")
    for g in old.net:
        if old.net[g][0] != new.net[g][0]:
            raise BadInput(f"0x{g:016x} is a {old.net[g][0]} in OLD and a {new.net[g][0]} in NEW")
    a, b = _cables(old), _cables(new)
    added, removed = sorted(b - a), sorted(a - b)
    # a port whose cable NEW re-plugs (reconcile's "moved") is unlinked before it is linked
    ends = {e for c in removed for e in (c[:2], c[2:])}
    replugged = sum(1 for c in added for e in (c[:2], c[2:]) if e in ends)
    new_nodes = sorted(new.net.keys() - old.net.keys())
    return {"added": added, "removed": removed, "replugged_ports": replugged,
            "new_nodes": new_nodes,
            "new_switches": sum(1 for g in new_nodes if new.net[g][0] == "Switch"),
            "new_hosts": sum(1 for g in new_nodes if new.net[g][0] == "Hca")}


# -- NEW with OLD's LIDs -------------------------------------------------------------------------
def kept_lids(old: IbFiles, new: IbFiles) -> tuple[dict[int, int], int]:
    """``{LID of NEW's plan: live LID}`` and the live top LID: every port of OLD keeps its
    LIDs, new switches take the next LIDs above OLD's top, then new hosts (aligned)."""
    step = 1 << new.lmc
    have = {int(s["guid"], 16): int(s["lid"]) for s in old.guids["switches"]}
    have.update((int(h["port_guid"], 16), int(h["lid"])) for h in old.guids["hosts"])
    top = max([int(s["lid"]) for s in old.guids["switches"]]
              + [int(h["lid"]) + step - 1 for h in old.guids["hosts"]])
    m, nxt = {}, top + 1
    for s in new.guids["switches"]:
        g = int(s["guid"], 16)
        if g not in have:
            have[g], nxt = nxt, nxt + 1
        m[int(s["lid"])] = have[g]
    nxt = -(-nxt // step) * step
    for h in new.guids["hosts"]:
        g = int(h["port_guid"], 16)
        if g not in have:
            have[g], nxt = nxt, nxt + step
        m.update((int(h["lid"]) + k, have[g] + k) for k in range(step))
    live_top = max(m.values())
    if live_top > MAX_UNICAST_LID:
        raise BadInput(f"keeping OLD's LIDs, NEW needs LIDs up to 0x{live_top:04x}, beyond the "
                       f"unicast limit 0x{MAX_UNICAST_LID:04X}")
    return m, live_top


def _moved(old: IbFiles, new: IbFiles) -> int:
    """Ports of OLD that NEW's own LID plan gives another LID."""
    def lids(f):
        out = {s["guid"]: s["lid"] for s in f.guids["switches"]}
        out.update((h["port_guid"], h["lid"]) for h in f.guids["hosts"])
        return out
    a, b = lids(old), lids(new)
    return sum(1 for g, lid in a.items() if b.get(g) != lid)


def write_live(new: IbFiles, m: dict[int, int], top: int, out: Path, note: str) -> IbFiles:
    """NEW's six files into ``out`` with every LID mapped by ``m``; returns them read back
    with the usual checks."""
    out.mkdir(parents=True, exist_ok=True)
    src, step = new.dir, 1 << new.lmc
    g = json.loads(json.dumps(new.guids))
    for s in g["switches"]:
        s["lid"] = m[int(s["lid"])]
    for h in g["hosts"]:
        h["lid"] = m[int(h["lid"])]
        h["lids"] = [h["lid"], h["lid"] + step - 1]
    g["top_lid"] = top
    g["ibsim_limits"]["L"] = max(int(g["ibsim_limits"]["L"]), -(-(top + 1) // 64) * 64)
    g["lids_kept"] = note
    (out / "guids.json").write_text(json.dumps(g))

    def lid(match, group=1) -> str:
        return str(m[int(match.group(group))])

    text = (src / "guid2lid").read_text()
    (out / "guid2lid").write_text(re.sub(r"(?m)^(0x[0-9a-fA-F]+) (0x[0-9a-fA-F]+) (0x[0-9a-fA-F]+)",
                                         lambda x: f"{x.group(1)} 0x{m[int(x.group(2), 16)]:04x} "
                                                   f"0x{m[int(x.group(3), 16)]:04x}", text))
    data = (src / "lfts.dump").read_bytes()
    data = re.sub(rb"(?m)^0x([0-9a-fA-F]+)(?= )",
                  lambda x: b"0x%04x" % m[int(x.group(1), 16)], data)
    data = re.sub(rb"(?m)^(Unicast lids \[0-)\d+(\] of switch Lid )(\d+)",
                  lambda x: b"%s%d%s%d" % (x.group(1), top, x.group(2), m[int(x.group(3))]), data)
    (out / "lfts.dump").write_bytes(data)
    text = (src / "sl2vl.dump").read_text()
    (out / "sl2vl.dump").write_text(re.sub(r"(base LID )(\d+)",
                                           lambda x: x.group(1) + lid(x, 2), text))
    text = (src / "fabric.net").read_text()
    (out / "fabric.net").write_text(f"# {note}\n" + re.sub(r"\blid (\d+)",
                                                           lambda x: "lid " + lid(x), text))
    shutil.copy(src / "path-sl.txt", out / "path-sl.txt")
    return load_ib_files(out)


def start_net(old: IbFiles, live: IbFiles) -> str:
    """The net file ibsim starts on: every node of NEW (live LIDs), each with OLD's cables
    only (the new nodes uncabled)."""
    def records(f: IbFiles) -> dict[int, list[str]]:
        recs, cur = {}, None
        for line in (f.dir / "fabric.net").read_text().splitlines():
            m = re.match(r"(?:switchguid|caguid)=(0x[0-9a-fA-F]+)", line)
            if m:
                cur = recs.setdefault(int(m.group(1), 16), [])
            elif not line.strip():
                cur = None
            if cur is not None:
                cur.append(line)
        return recs

    old_recs, new_recs = records(old), records(live)
    head = [l for l in (live.dir / "fabric.net").read_text().splitlines()[:6] if l.startswith("#")]
    out = head + ["# start of a live update: OLD's cables only; NEW's are linked at run time"]
    port_line = re.compile(r"\s*\[\d+\]")
    for g, lines in new_recs.items():
        out.append("")
        out += [l for l in lines if not port_line.match(l)]
        out += [l for l in old_recs.get(g, []) if port_line.match(l)]
    return "\n".join(out) + "\n\n"


# -- diffs of LFTs ---------------------------------------------------------------------------------
def lft_changes(before: LftTable, after: LftTable, old_switches, lids: dict[int, int] | None = None,
                first: int = FIRST_CHANGES) -> dict:
    """Entries that differ between two LFT tables: at the switches of ``old_switches``
    ``changed`` (a port to another port), ``added`` (no port to a port), ``removed`` (a port to
    none); the switches that only ``after`` has (``new_switches``, ``new_switch_entries``).
    ``by_switch`` counts per old switch (non-zero only) with ``ports``, how many of its changed
    or added entries now leave by each port; ``first`` lists the first entries that differ
    (``lids``: switch GUID -> its LID, for the listing).  O(switches x LIDs), vectorised per
    switch."""
    old_switches = set(old_switches)
    lids = lids or {}
    width = max(before.ports.shape[1], after.ports.shape[1])
    tot = {"changed": 0, "added": 0, "removed": 0}
    by, listed, new_sw, new_entries = {}, [], 0, 0
    for g in sorted(set(before) | set(after)):
        a = after.forwarding(g, width)
        if g not in old_switches:
            new_sw += 1
            new_entries += int(np.count_nonzero(a != NO_PORT))
            continue
        b = before.forwarding(g, width)
        diff = np.flatnonzero(b != a)
        if not len(diff):
            continue
        x, y = b[diff], a[diff]
        kinds = np.where(x == NO_PORT, 0, np.where(y == NO_PORT, 2, 1))
        c = {k: int(np.count_nonzero(kinds == i)) for i, k in enumerate(KINDS)}
        out, n = np.unique(y[y != NO_PORT], return_counts=True)
        for lid, i, xb, ya in zip(diff[:max(0, first - len(listed))].tolist(), kinds.tolist(),
                                  x.tolist(), y.tolist()):
            listed.append({"switch": f"0x{g:016x}", "switch_lid": lids.get(g), "lid": lid,
                           "kind": KINDS[i],
                           "before": None if xb == NO_PORT else xb,
                           "after": None if ya == NO_PORT else ya})
        for k in tot:
            tot[k] += c[k]
        by[f"0x{g:016x}"] = dict(c, lid=lids.get(g),
                                 ports={str(p): k for p, k in zip(out.tolist(), n.tolist())})
    return dict(tot, new_switches=new_sw, new_switch_entries=new_entries,
                switches_touched=len(by), by_switch=by, first=listed)


def _counts(d: dict) -> dict:
    return {k: d[k] for k in ("changed", "added", "removed", "new_switches",
                              "new_switch_entries", "switches_touched")}


def reach(lfts: LftTable, f: IbFiles) -> dict:
    """Walk every (source, LID) pair -- sources every switch and every HCA, LIDs every LID of
    ``f`` but the source's own -- through ``lfts`` over ``f``'s wiring: ``delivered`` when
    the walk ends at the LID's port (a switch's port 0, the HCA), else a dead port, a
    missing entry, a wrong node or a loop.  O(switches x LIDs)."""
    step = 1 << f.lmc
    by_id = {s["id"]: int(s["guid"], 16) for s in f.guids["switches"]}
    switches = list(by_id.values())
    owner = {int(s["lid"]): int(s["guid"], 16) for s in f.guids["switches"]}
    attach = {}                                   # HCA node GUID -> its switch's GUID
    for h in f.guids["hosts"]:
        owner.update((int(h["lid"]) + k, int(h["node_guid"], 16)) for k in range(step))
        attach[int(h["node_guid"], 16)] = by_id[h["switch"]]
    width = max(owner, default=0) + 1
    fwd = {g: lfts.forwarding(g, width).tolist() for g in switches}
    pairs = delivered = max_hops = 0
    failed = []
    for lid, dst in owner.items():
        hops: dict[int, int] = {}                 # switch -> switch hops to dst, -1: fails
        for g0 in switches:
            path, on, g = [], set(), g0
            while True:
                if g in hops:
                    res = hops[g]
                    break
                if g in on:                       # a loop
                    res = -1
                    break
                port = fwd[g][lid]
                peer = f.net[g][1].get(port) if port not in (0, NO_PORT) else None
                if port == 0 or peer is None or f.net[peer[0]][0] != "Switch":
                    # the switch's own LID, no entry / a dead port, or out to an HCA
                    res = hops[g] = 0 if (g if port == 0 else peer and peer[0]) == dst else -1
                    break
                path.append(g)
                on.add(g)
                g = peer[0]
            for k, u in enumerate(reversed(path)):
                hops[u] = res + k + 1 if res >= 0 else -1
        for src in switches + list(attach):
            if src == dst:
                continue
            h = hops[attach[src]] if src in attach else hops[src]
            pairs += 1
            if h >= 0:
                delivered += 1
                max_hops = max(max_hops, h)
            elif len(failed) < 10:
                failed.append({"source": f"0x{src:016x}", "lid": lid})
    return {"sources": len(switches) + len(attach), "lids": len(owner), "pairs": pairs,
            "delivered": delivered, "undelivered": pairs - delivered,
            "max_switch_hops": max_hops, "first_undelivered": failed}


# -- the processes -----------------------------------------------------------------------------
class _Subnet:
    """ibsim (console on a pipe) and OpenSM with the ``fabroute`` engine reading files at fixed
    paths, in one scratch directory; stopped by PID in :meth:`stop`."""

    def __init__(self, scratch: Path, sock: str, tools: Path, first_host: str,
                 timeout: float):
        self.dir, self.tools, self.timeout = scratch, tools, timeout
        self.ibsim = self.opensm = None
        self.n_cmds = 0
        base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        base["IBSIM_SOCKNAME"] = sock
        self.base_env = base
        self.client_env = dict(base, LD_PRELOAD=ib.UMAD2SIM, SIM_HOST=first_host,
                               OSM_TMP_DIR=str(scratch / "osm-tmp"),
                               OSM_CACHE_DIR=str(scratch / "osm-cache"))
        for sub in ("osm-tmp", "osm-cache", "plugin", "live"):
            (scratch / sub).mkdir()
        self.sim_log, self.osm_log = scratch / "ibsim.log", scratch / "opensm.log"
        self.report: dict = {"socket": sock, "tools": str(tools)}

    def fail(self, why: str, *logs) -> RunFailed:
        return RunFailed(why, dict(self.report, log_tail=ib._tails(*logs)))

    def start_ibsim(self, net: Path, lim: dict) -> None:
        cmd = [ib._which("ibsim"), "-s", "-N", str(lim["N"]), "-S", str(lim["S"]),
               "-P", str(lim["P"]), "-L", str(lim["L"]), str(net)]
        with open(self.sim_log, "wb") as log:   # console on (no -n): commands come on stdin
            self.ibsim = subprocess.Popen(cmd, cwd=self.dir, env=self.base_env,
                                          stdin=subprocess.PIPE, stdout=log,
                                          stderr=subprocess.STDOUT)
        self.report["ibsim"] = {"pid": self.ibsim.pid, "cmd": cmd}
        why = ib._wait_for(self.ibsim, self.sim_log, "Network simulator ready.", self.timeout)
        if why:
            raise self.fail(f"ibsim {why}", (self.sim_log, ib.LOG_TAIL))

    def console(self, lines: list[str]) -> list[str]:
        """Run ``lines`` in ibsim's console (one ``!file`` command) and wait until it has;
        raises :class:`RunFailed` when ibsim answers any of them with an error."""
        if not lines:
            return []
        self.n_cmds += 1
        f = self.dir / f"ibsim-{self.n_cmds}.cmds"
        f.write_text("\n".join(lines) + "\n")
        mark = f"fabroute-done-{self.n_cmds}"
        start = self.sim_log.stat().st_size
        self.ibsim.stdin.write(f"!{f}\n#{mark}\n".encode())
        self.ibsim.stdin.flush()
        why = ib._wait_for(self.ibsim, self.sim_log, mark, self.timeout)
        if why:
            raise self.fail(f"ibsim {why}", (self.sim_log, ib.LOG_TAIL))
        with open(self.sim_log, "rb") as log:
            log.seek(start)
            said = log.read().decode(errors="replace").split(mark)[0]
        errors = [l.strip() for l in said.replace("sim>", "\n").splitlines()
                  if any(e in l for e in SIM_ERRORS)]
        if errors:
            raise self.fail(f"ibsim refused a console command: {errors[0]}",
                            (self.sim_log, ib.LOG_TAIL))
        return lines

    def install(self, f: IbFiles) -> None:
        """``f``'s LFT, SL2VL and path-SL files at the paths OpenSM reads, each replaced in
        one rename (OpenSM and the plugin never see half a file)."""
        for src, dst in ((f.dir / "lfts.dump", self.dir / "live" / "lfts.dump"),
                         (f.dir / "sl2vl.dump", self.dir / "plugin" / "sl2vl.dump"),
                         (f.dir / "path-sl.txt", self.dir / "plugin" / "path-sl.txt")):
            tmp = dst.with_name(dst.name + ".new")
            shutil.copy(src, tmp)
            os.replace(tmp, dst)

    def start_opensm(self, lmc: int, guid2lid: Path, on_trap: bool = False) -> float:
        shutil.copy(guid2lid, self.dir / "osm-cache" / "guid2lid")
        (self.dir / "qos-policy.conf").write_text(ib.QOS_POLICY)
        conf = self.dir / "opensm.conf"
        conf.write_text(f"# fabroute ib update\n"
                        f"event_plugin_name {ib.PLUGIN_NAME}\n"
                        f"event_plugin_options {self.dir / 'plugin'}\n"
                        f"qos TRUE\n"
                        f"qos_policy_file {self.dir / 'qos-policy.conf'}\n"
                        f"dump_files_dir {self.dir / 'osm-tmp'}\n"
                        f"sweep_on_trap {'TRUE' if on_trap else 'FALSE'}\n")
        env = dict(self.client_env, LD_LIBRARY_PATH=":".join(
            [str(self.tools)] + [p for p in [self.base_env.get("LD_LIBRARY_PATH")] if p]))
        cmd = [ib._which("opensm"), "-F", str(conf), "-d2", "-e", "-f", str(self.osm_log),
               "-s", "0", "-x", "-l", str(lmc), "-R", "fabroute,no_fallback",
               "-U", str(self.dir / "live" / "lfts.dump")]
        t = time.perf_counter()
        with open(self.dir / "opensm.out", "wb") as out:
            self.opensm = subprocess.Popen(cmd, cwd=self.dir, env=env, stdin=subprocess.DEVNULL,
                                           stdout=out, stderr=subprocess.STDOUT)
        self.report["opensm"] = {"pid": self.opensm.pid, "cmd": cmd}
        why = ib._wait_for(self.opensm, self.osm_log, "SUBNET UP", self.timeout,
                           fail=ib._PLUGIN_FAIL)
        if why:
            raise self.fail(f"opensm {why}", (self.osm_log, ib.LOG_TAIL),
                            (self.dir / "opensm.out", 4), (self.sim_log, 3))
        text = self.osm_log.read_text(errors="replace")
        if "fabroute_osm: ready" not in text or "fabroute tables configured" not in text:
            raise self.fail("opensm did not route with the fabroute engine",
                            (self.osm_log, ib.LOG_TAIL))
        return time.perf_counter() - t

    def _ups(self) -> tuple[int, int]:
        data = self.osm_log.read_bytes()
        return sum(1 for l in data.splitlines() if l.rstrip().endswith(b"SUBNET UP")), len(data)

    def resweep(self, mark: tuple[int, int] | None = None, settle: float = 0.0) -> dict:
        """``kill -HUP`` OpenSM (a forced heavy sweep) and wait for its ``SUBNET UP``; with
        ``mark`` (:meth:`_ups` before the cabling) no signal: wait for the sweeps OpenSM
        started on the link-state traps, until its log has been quiet for ``settle`` s."""
        ups, offset = mark or self._ups()
        t = time.perf_counter()
        if mark is None:
            self.opensm.send_signal(signal.SIGHUP)
        end, delay, quiet = time.monotonic() + self.timeout, 0.01, (offset, time.monotonic())
        last = (ups, t)
        while True:
            n, size = self._ups()
            if n > last[0]:
                last = (n, time.perf_counter())
            data = self.osm_log.read_bytes()[offset:]
            bad = next((m for m in SWEEP_FAIL if m.encode() in data), None)
            if bad:
                raise self.fail(f"opensm logged {bad!r} in the re-sweep",
                                (self.osm_log, ib.LOG_TAIL))
            if size != quiet[0]:
                quiet = (size, time.monotonic())
            if n > ups and time.monotonic() - quiet[1] >= settle:
                break
            if self.opensm.poll() is not None or time.monotonic() > end:
                raise self.fail("opensm " + ("exited" if self.opensm.poll() is not None
                                             else f"did not log SUBNET UP within "
                                                  f"{self.timeout:.0f} s") + " after SIGHUP",
                                (self.osm_log, ib.LOG_TAIL), (self.sim_log, 3))
            time.sleep(delay)
            delay = min(0.1, delay * 1.5)
        text = data.decode(errors="replace")
        reload = re.search(r"fabroute_osm: (reloaded: [^\n]*)", text)
        return {"trigger": "link-state traps (sweep_on_trap)" if mark else
                "SIGHUP (forced heavy sweep)", "seconds": last[1] - t,
                "plugin": reload.group(1) if reload else "files unchanged: not reloaded",
                "lft_engine": "file engine re-read " + str(self.dir / "live" / "lfts.dump"),
                "heavy_sweeps": text.count("SUBNET UP")}

    def read(self, expected: IbFiles, max_paths: int) -> tuple[dict, dict]:
        pairs, total, stride = ib.path_pairs(expected, max_paths)
        rep: dict = {}
        answers, lk, sk = ib.read_back(self.tools, self.dir, self.client_env, expected, pairs,
                                       self.timeout, rep)
        parts, lfts = ib.compare_read(expected, answers, lk, sk, (pairs, total, stride, max_paths))
        parts["readback"] = rep["readback"]
        parts["mismatches"] = sum(parts[k]["mismatches"] for k in ("lft", "sl2vl", "path_sl"))
        return parts, lfts

    def stop(self) -> None:
        ib._stop(self.opensm)   # OpenSM first: without its ibsim it ignores SIGTERM
        ib._stop(self.ibsim)
        if self.ibsim is not None and self.ibsim.stdin:
            self.ibsim.stdin.close()


# -- the whole update ------------------------------------------------------------------------
def update(old_dir, new_dir, *, keep_logs: bool = False, max_paths: int = ib.MAX_PATHS,
           timeout: float | None = None, trigger: str = "hup", settle: float = SETTLE_S,
           discover: Path | None = None) -> dict:
    """Run OLD on ibsim + OpenSM, change the fabric and the tables to NEW live, re-sweep,
    read back and diff (module docstring).  Returns the report (``ok``: both read-backs
    without a mismatch, every pair delivered, the LFT changes OpenSM made equal to the
    files' diff); raises :class:`BadInput` before starting anything and :class:`RunFailed`
    when a process fails.  Both processes are stopped on return, error or Ctrl-C.

    ``trigger="trap"`` instead: OpenSM runs with ``sweep_on_trap TRUE``, the NEW files are
    installed *before* the cabling, and OpenSM's own sweeps on the link-state traps apply
    them; the update is over when its log has been quiet for ``settle`` s after a
    ``SUBNET UP``.

    ``discover``: a file that receives what real ``ibnetdiscover`` prints right after the
    cabling, from the running subnet (what an operator reads once the cables are put
    right, for ``fabroute reconcile``)."""
    if trigger not in ("hup", "trap"):
        raise BadInput(f"trigger {trigger!r}; expected hup or trap")
    if discover is not None:
        discover = check_out_file(discover, "--discover", in_dir=True)
    t0 = time.perf_counter()
    old, new = load_ib_files(old_dir), load_ib_files(new_dir)
    diff = fabric_diff(old, new)
    missing = ib.binaries_missing()
    if missing:
        raise BadInput(f"not installed: {', '.join(missing)}; {ib.APT_HINT}")
    tools = ib.build_tools()
    if timeout is None:
        timeout = 30.0 + new.lfts.entries / 20_000
    sock = f"fabroute-{os.getpid()}-{next(ib._runs)}"
    scratch = Path(tempfile.mkdtemp(prefix=f"{sock}-", dir="/tmp"))
    names = _names(new)
    sub = None
    try:
        m, top = kept_lids(old, new)
        live = write_live(new, m, top, scratch / "new-live",
                          f"LIDs of {old.dir} kept (fabroute ib update); NEW's plan otherwise")
        moved = _moved(old, new)
        (scratch / "start.net").write_text(start_net(old, live))
        timings = {"check_s": time.perf_counter() - t0}
        sub = _Subnet(scratch, sock, tools, new.guids["hosts"][0]["name"], timeout)
        report = {"old": str(old_dir), "new": str(new_dir), "files": [str(old.dir), str(new.dir)],
                  "topology": [old.guids.get("topology"), new.guids.get("topology")],
                  "routing": [old.guids.get("routing"), new.guids.get("routing")],
                  "lmc": new.lmc}
        if keep_logs:
            report["logs"] = str(scratch)
        lim = live.guids["ibsim_limits"]
        t = time.perf_counter()
        sub.start_ibsim(scratch / "start.net", lim)
        timings["ibsim_ready_s"] = time.perf_counter() - t
        sub.install(old)
        timings["opensm_up_s"] = sub.start_opensm(old.lmc, live.dir / "guid2lid",
                                                  on_trap=trigger == "trap")
        t = time.perf_counter()
        before, lft_before = sub.read(old, max_paths)
        timings["readback_before_s"] = time.perf_counter() - t

        def end(g, p):
            return f'"{names[g]}"[{p}]'
        unlink = [f"Unlink {end(g, p)}" for g, p, _, _ in diff["removed"]]
        link = [f"Link {end(g, p)} {end(h, q)}" for g, p, h, q in diff["added"]]
        mark = None
        if trigger == "trap":              # the tables first: the traps start the sweeps
            sub.install(live)
            mark = sub._ups()
        t = time.perf_counter()
        sub.console(unlink + link)
        timings["cabling_s"] = time.perf_counter() - t
        if discover is not None:
            t = time.perf_counter()
            text = ibnetdiscover(sub.client_env, scratch, timeout, sub.report)
            atomic_write(discover, text)
            timings["ibnetdiscover_s"] = time.perf_counter() - t
        if trigger == "hup":
            sub.install(live)
        sweep = sub.resweep(mark, settle if mark else 0.0)
        timings["resweep_s"] = sweep.pop("seconds")
        t = time.perf_counter()
        after, lft_after = sub.read(live, max_paths)
        timings["readback_after_s"] = time.perf_counter() - t
        report.update(ibsim=sub.report["ibsim"], opensm=sub.report["opensm"], socket=sock,
                      tools=str(tools))
    except RunFailed as e:
        e.report = dict(sub.report if sub else {}, **(e.report or {}))
        raise
    finally:
        if sub is not None:
            sub.stop()
        if not keep_logs:
            shutil.rmtree(scratch, ignore_errors=True)

    t = time.perf_counter()
    old_sw = {int(s["guid"], 16) for s in old.guids["switches"]}
    sw_lids = {int(s["guid"], 16): int(s["lid"]) for s in live.guids["switches"]}
    seen = lft_changes(lft_before, lft_after, old_sw, sw_lids)
    files = lft_changes(old.lfts, live.lfts, old_sw, sw_lids)
    sl2vl_rows = sum(1 for g, (_, rows) in live.sl2vl.items() for k, v in rows.items()
                     if g in old.sl2vl and old.sl2vl[g][1].get(k, v) != v)
    walk = reach(lft_after, live)
    timings["compare_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t0
    agree = _counts(seen) == _counts(files)
    report.update({
        "fabric": {"new_switches": diff["new_switches"], "new_hosts": diff["new_hosts"],
                   "cables_added": len(diff["added"]), "cables_removed": len(diff["removed"]),
                   "ports_replugged": diff["replugged_ports"],
                   "ibsim_commands": {"Unlink": len(unlink), "Link": len(link),
                                      "first": (unlink + link)[:4]}},
        "lids": {"top": top, "new_ports": len(diff["new_nodes"]),
                 "old_ports_new_plan_moves": moved,
                 "note": "ports of OLD whose LID NEW's own plan differs from OLD's (a restart "
                         "on NEW's files would renumber them); the live copy keeps OLD's"},
        "before": before, "after": after, "sweep": sweep,
        "opensm_changed": seen,
        "predicted_by_files": _counts(files),
        "sl2vl_rows_changed_on_old_nodes": sl2vl_rows,
        "reach": walk,
        "changed": seen["changed"], "added": seen["added"], "removed": seen["removed"],
        "new_switches": seen["new_switches"], "new_switch_entries": seen["new_switch_entries"],
        "mismatches": before["mismatches"] + after["mismatches"],
        "timings": {k: round(v, 3) for k, v in timings.items()}})
    if discover is not None:
        report["discovered"] = str(discover)
    report["ok"] = report["mismatches"] == 0 and agree and walk["undelivered"] == 0
    report["changes_agree_with_files"] = agree
    return report


# -- command line ----------------------------------------------------------------------------
def add_ib_update_parser(ib_sub) -> None:
    sp = ib_sub.add_parser("update", help="load OLD into OpenSM on ibsim, then grow or degrade "
                           "the running subnet to NEW (ibsim Link/Unlink, files replaced, "
                           "kill -HUP): read back before and after, report what OpenSM changed")
    sp.add_argument("old", help="the table set running first (DIR or DIR/ib)")
    sp.add_argument("new", help="the table set of the grown / degraded fabric")
    sp.add_argument("--keep-logs", action="store_true",
                    help="keep the scratch directory (logs, live files, start.net) and name it")
    sp.add_argument("--max-paths", type=paths_option, default=ib.MAX_PATHS,
                    help="PathRecords read back per read-back before sampling (0 = all)")
    sp.add_argument("--trigger", choices=("hup", "trap"), default="hup",
                    help="hup (default): cable, replace the files, kill -HUP; trap: replace the "
                         "files, cable, and let OpenSM sweep on the link-state traps")
    sp.add_argument("--discover", metavar="FILE",
                    help="write what ibnetdiscover prints from the running subnet right after "
                         "the cabling to FILE (for fabroute reconcile)")
    sp.add_argument("--json", action="store_true", help="print the report as JSON (for "
                    "scripts) instead of text")
    sp.set_defaults(func=cmd_ib_update)


def cmd_ib_update(args) -> int:
    try:
        rep = update(Path(args.old), Path(args.new), keep_logs=args.keep_logs,
                     max_paths=args.max_paths, trigger=args.trigger, discover=args.discover)
    except BadInput as e:
        raise BadInput(f"ib update: {e}") from None
    except RunFailed as e:
        emit(dict(e.report or {}, error=str(e), ok=False), args.json, indent=1)
        print(f"ib update: {e}", file=sys.stderr)
        return 1
    emit(rep, args.json, indent=1)
    return 0 if rep["ok"] else 1
