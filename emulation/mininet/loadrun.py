"""``fabroute emulate ... --traffic T --load X``: a table set under real load, from the
controller's first flow-mod to the last frame counted.

The net's egress ports are shaped to ``link_mbit`` (``emulation/mininet/shaping.py``), the
controller serves the proven tables — UGAL-L with its adaptive decisions from port and queue
statistics unless ``adaptive`` is ``None`` — and every emulated host sends paced UDP with
random source ports (``emulation/mininet/traffic.py``) through one or more traffic phases.
The report joins what the receivers counted (goodput, loss, misrouted frames, per phase and
over time) with what the controller decided (its non-minimal share per round, on the same
clock) and whether every decision round read back equal.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from emulation.mininet.ctl import Controller, free_port
from emulation.mininet.net import cleanup_leftovers, emulate, ensure_ovs
from emulation.mininet.session import PREFIX, run_pki
from emulation.mininet.traffic import run_traffic
from tablegen.errors import BadInput, NotExpressible
from tablegen.exports.files import write_table_set
from tablegen.exports.openflow import SPLIT_BITS, plan
from tablegen.tables import TableSet
from tablegen.verify import verify

__all__ = ["run_load", "reaction"]


def controller_args(adaptive: dict | None, link_mbit: float, decisions: Path) -> list[str]:
    """``fabroute controller`` options of the adaptive decisions (the estimator measures
    against the shaped capacity)."""
    if adaptive is None:
        return ["--static"]
    return ["--poll", str(adaptive["poll"]), "--split-bits", str(adaptive["split_bits"]),
            "--hysteresis", str(adaptive["hysteresis"]), "--link-mbit", str(link_mbit),
            "--view", adaptive.get("view", "first-hop"),
            "--decisions", str(decisions)]


def run_load(ts: TableSet, phases: list[tuple[str, float]], *, load: float, link_mbit: float,
             adaptive: dict | None, hosts_per_switch: int | None = None, seed: int = 1,
             payload: int = 1400, tls: bool = False, wiring=None, log=print,
             controller_extra: tuple[str, ...] = ()) -> dict:
    """Run ``phases`` (``[(traffic, seconds)]``) at ``load`` × ``link_mbit`` per host on the
    emulated fabric of ``ts``; returns the JSON-ready report (module doc).  ``wiring``
    (:class:`~emulation.mininet.topo.Wiring`, no cable left out): switches with other
    datapath ids and port numbers, given to the controller as ``--fabric`` (its inventory
    file).  ``controller_extra``: more ``fabroute controller`` options (e.g. ``--metrics
    HOST:PORT`` for a Prometheus watching the run).  Tables the OpenFlow pipeline cannot express are
    :class:`~tablegen.errors.BadInput` before anything starts."""
    split = (adaptive or {}).get("split_bits", SPLIT_BITS)
    try:
        plan(ts, split)
    except NotExpressible as e:
        raise BadInput(f"emulate: {e}") from None
    topo = ts.topo
    t0 = time.perf_counter()
    ensure_ovs()
    with tempfile.TemporaryDirectory(prefix="fabroute-load-") as tmp:
        d = Path(tmp)
        write_table_set(ts, verify(ts), d / "tables", ("openflow",))
        decided = ts.routing == "ugal-l" and adaptive is not None
        port = free_port()
        pki_dir, ovs_tls = run_pki(d, topo) if tls else (None, None)
        args = controller_args(adaptive, link_mbit, d / "decisions.jsonl")
        if wiring is not None:
            wiring.fabric(topo).save(d / "inventory.json")
            args += ["--fabric", str(d / "inventory.json")]
        ctl = Controller(d / "tables", port, d, tls=pki_dir,
                         args=(*args, *controller_extra))
        try:
            with emulate(topo, controller_port=port, hosts_per_switch=hosts_per_switch,
                         prefix=PREFIX, tls=ovs_tls, link_mbit=link_mbit,
                         wiring=wiring) as fnet:
                log(f"net up: {topo.n_switches} switches, {len(fnet.host_ids)} hosts, links "
                    f"{link_mbit:g} Mbit/s; waiting for the controller to verify every switch…")
                verified_after = ctl.wait_verified(topo.n_switches)
                before = ctl.status()
                log(f"traffic: {' → '.join(f'{t} {s:g} s' for t, s in phases)} at load {load:g}")
                start = {}

                def on_bin(b):      # the traffic's clock on CLOCK_MONOTONIC, once
                    start.setdefault("t0", time.monotonic() - b["t"])

                rep = run_traffic(fnet, phases, load=load, link_mbit=link_mbit, seed=seed,
                                  payload=payload, on_bin=on_bin)
                after = ctl.status()
        finally:
            ctl.stop()
            cleanup_leftovers(PREFIX)
        rounds = _rounds(d / "decisions.jsonl", start.get("t0")) if decided else []
    report = {"topology": topo.name(), "routing": ts.routing, "adaptive": decided,
              "traffic": [t for t, _ in phases], "load": load, "link_mbit": link_mbit,
              "duration": sum(s for _, s in phases), "switches": topo.n_switches,
              "hosts": len(fnet.host_ids), "payload": payload}
    report.update({k: rep[k] for k in ("offered_mbps", "delivered_mbps", "offered_load",
                                       "accepted_load", "sent", "received", "late", "lost",
                                       "misrouted", "latency_ms", "max_lag_ms")
                   if k in rep})
    report["phases"] = rep.get("phases", [])
    report["bins"] = rep.get("bins", [])
    ad = after.get("adaptive") or {}
    weights = [_pair_weights(ts, fnet.host_ids, t, seed) for t, _ in phases]
    spans = _spans(phases)
    for r in rounds:           # the share of each phase's flows, and of the current phase's
        if "slots" in r:
            slots = np.asarray(r.pop("slots")) / (1 << adaptive["split_bits"])
            r["shares"] = [round(float((w * slots).sum() / w.sum()), 4) for w in weights]
            k = next((i for i, (lo, hi) in enumerate(spans) if r["t"] < hi), len(phases) - 1)
            r["pattern_share"] = r["shares"][k]
    report["decisions"] = [{"t": r["t"], "share": r["share"], "changed": r["changed"],
                            **({"pattern_share": r["pattern_share"]}
                               if "pattern_share" in r else {})} for r in rounds]
    report["controller"] = {
        "verified_after": round(verified_after, 3),
        "flow_mods": sum(v["flow_mods"] for v in after.get("per_switch", {}).values()),
        "failed": after.get("failed", 0), "verified": after.get("verified", 0),
        "rounds": ad.get("rounds", 0), "decision_flow_mods": ad.get("decision_flow_mods", 0),
        "rounds_verified": ad.get("rounds_verified", 0) - ((before.get("adaptive") or {})
                                                           .get("rounds_verified", 0)),
        "rounds_differing": ad.get("rounds_differing", 0), "poll": ad.get("poll")}
    if decided:
        report["reaction"] = reaction(rounds, phases, ad.get("poll") or 1.0)
        for ph, (lo, hi) in zip(report["phases"], spans):
            inside = [r.get("pattern_share", r["share"]) for r in rounds
                      if lo + (hi - lo) / 2 <= r["t"] < hi]
            ph["share"] = round(sum(inside) / len(inside), 4) if inside else None
    report["seconds"] = round(time.perf_counter() - t0, 3)
    report["ok"] = (report.get("misrouted", 1) == 0 and report["controller"]["failed"] == 0
                    and report["controller"]["rounds_differing"] == 0)
    return report


def _pair_weights(ts: TableSet, hosts: list[int], traffic: str, seed: int) -> np.ndarray:
    """``float[N, K]``: how many (source host, destination host) pairs of the pattern fall
    on each (source switch, destination key) of the decisions — the pairs a share moves."""
    from simulator.traffic import pattern

    topo = ts.topo
    group = ts.classes[-1].target0 == "group"
    key = topo.group if group else np.arange(topo.n_switches)
    w = np.zeros((topo.n_switches, topo.n_groups if group else topo.n_switches))
    lo, hi = pattern(topo, traffic, seed)
    sw = topo.host_table()[:, 1]
    on = np.zeros(topo.n_hosts, dtype=bool)
    on[hosts] = True
    for h in hosts:
        d = np.arange(lo[h], hi[h])
        d = d[on[d] & (d != h)]
        np.add.at(w, (sw[h], key[sw[d]]), 1.0)
    w[np.arange(topo.n_switches), key] = 0.0        # a switch's own key: always minimal
    return w if w.sum() else np.ones_like(w)


def _spans(phases) -> list[tuple[float, float]]:
    out, t = [], 0.0
    for _, s in phases:
        out.append((t, t + s))
        t += s
    return out


def _rounds(path: Path, t0: float | None) -> list[dict]:
    """The controller's decision rounds, their times moved onto the traffic's clock (0 = the
    first frame sent); before it: negative."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if t0 is not None:
            r["t"] = round(r["monotonic"] - t0, 3)
        out.append(r)
    return out


def reaction(rounds: list[dict], phases, poll: float) -> list[dict]:
    """Per phase change A -> B: how many poll periods after it the non-minimal share of B's
    flows first rose above its level at the change (``rises``; ``rises_rounds``: in the
    controller's decision rounds since the change, which a loaded machine stretches in time
    but not in number), and the share of A's flows first fell below its level (``falls``);
    ``None`` where it never did within B (or where there was nothing to fall from).  Shares of a pattern's flows weight every (source,
    destination) share by the pattern's host pairs there (``shares`` of each round)."""
    out = []
    spans = _spans(phases)
    for k in range(1, len(phases)):
        t = spans[k][0]
        prior = [r for r in rounds if r["t"] < t and "shares" in r]
        inside = [r for r in rounds if spans[k][0] <= r["t"] < spans[k][1] and "shares" in r]
        if not prior or not inside:
            continue
        a0, b0 = prior[-1]["shares"][k - 1], prior[-1]["shares"][k]
        rise = next((r for r in inside if r["shares"][k] > b0 + 1e-3), None)
        fall = next((r for r in inside if r["shares"][k - 1] < a0 - 1e-3), None)
        out.append({"at": round(t, 3), "from": phases[k - 1][0], "to": phases[k][0],
                    "share_of_new": [b0, inside[-1]["shares"][k]],
                    "share_of_old": [a0, inside[-1]["shares"][k - 1]],
                    "rises": None if rise is None else round((rise["t"] - t) / poll, 2),
                    "rises_rounds": None if rise is None else inside.index(rise) + 1,
                    "falls": None if fall is None or a0 <= 1e-3 else
                    round((fall["t"] - t) / poll, 2)})
    return out
