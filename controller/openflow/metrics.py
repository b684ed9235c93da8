"""Prometheus metrics of the running controller (``fabroute controller --metrics HOST:PORT``).

Like faucet's, but built at scrape time: :class:`Metrics` is a custom collector that reads
the controller's state when Prometheus asks (a :class:`View`: the
:class:`~controller.openflow.fabric.Fabric` with its switches and UGAL-L decisions, the
failed cables, the last live update, the repairs made ready, the role, the latest port
statistics), so OpenFlow events pay nothing for it.  Only what cannot be derived later is
recorded where it happens: each live update's duration and each cable repair's time from
the port event to the new tables in force (histograms, :meth:`Metrics.update_done`).

:func:`snapshot` computes the numbers once as plain data (per port, per switch, per UGAL-L
share, failures, update, role) for any reader; :meth:`Metrics.collect` turns it into
Prometheus families.  Names follow Prometheus' conventions: ``fabroute_`` prefix, base
units (bytes, seconds, ratios 0..1), ``_total`` for counters, ids as labels.  Every series
is listed in ``docs/operations.md``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["Metrics", "View", "exposition", "snapshot", "PAIRS_MAX", "serve"]

#: (source, destination) UGAL-L shares exported one series each up to this many pairs;
#: beyond it only the mean per destination (a Slim Fly q = 19 would have 521,284 series)
PAIRS_MAX = 10_000
#: seconds: a repair is expected in milliseconds to a few seconds, a live update up to a minute
REPAIR_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
UPDATE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass
class View:
    """What the collector reads, assembled at scrape time (the app's ``metrics_view``).

    ``ports``: dpid -> ``(unix time, [OFPPortStats])`` of the newest statistics reply;
    ``update``: the last live update's report (``app._apply``), ``kind``/``phase``: the
    running update's mode and phase (``None`` when none runs)."""

    fabric: object
    links: object = None
    prepared: object = None
    roles: object = None
    update: dict | None = None
    updates: int = 0
    updating: bool = False
    held: bool = False
    kind: str | None = None
    phase: str | None = None
    ports: dict = field(default_factory=dict)


def _peer(topo, switch: int, port: int) -> str:
    """The other end of ``switch``'s planned ``port``: ``"s<V>:<port>"``, ``"h<host>"`` or
    ``""`` (no cable there)."""
    hs = int(topo.hosts[switch])
    if 1 <= port <= hs:
        return f"h{int(topo.host_offset[switch]) + port - 1}"
    j = topo.port_index(switch, port)
    if 0 <= j < topo.radix and topo.adj[switch, j] >= 0:
        v = int(topo.adj[switch, j])
        return f"s{v}:{int(topo.hosts[v]) + 1 + int(topo.peer[switch, j])}"
    return ""


_digests: dict[int, tuple[object, str]] = {}


def program_digest(prog) -> str:
    """First 16 hex digits of a SHA-256 over a program's flows and groups (cached per
    program object: a program is immutable and recomputed only when it changes)."""
    hit = _digests.get(prog.dpid)
    if hit is not None and hit[0] is prog:
        return hit[1]
    h = hashlib.sha256(repr((prog.flows, prog.groups)).encode()).hexdigest()[:16]
    _digests[prog.dpid] = (prog, h)
    return h


def snapshot(view: View, now: float | None = None) -> dict:
    """The controller's state as plain numbers (JSON-ready): ``fabric`` (routing, topology,
    cookie, counts), ``switches`` (per switch: dpid, state, verified, flows, digest, repairs,
    errors, flow mods, last read-back), ``ports`` (per port with statistics: switch, dpid,
    port, peer, bytes/packets/drops each way, the estimator's load and queue), ``ugal``
    (rounds, shares per source and destination key, reversals), ``failures`` (cables down),
    ``update`` and ``role``.  ``now``: monotonic time for the estimator's ageing."""
    fab = view.fabric
    out: dict = {"fabric": None, "switches": [], "ports": [], "ugal": None,
                 "failures": {"cables": []}, "update": None, "role": None}
    roles = view.roles
    out["role"] = {"role": "single", "state": "master"} if roles is None else \
        {"role": roles.role, "state": roles.state, "generation": roles.generation}
    out["update"] = {"count": view.updates, "running": view.updating, "held": view.held,
                     "kind": view.kind, "phase": view.phase, "last": view.update}
    if view.links is not None:
        out["failures"]["cables"] = sorted(map(list, view.links.failed()))
    if view.prepared is not None:
        out["failures"]["prepared"] = view.prepared.status()
    if fab is None:
        return out
    topo = fab.topo
    states = [st.state for st in fab.switches.values()]
    out["fabric"] = {"routing": fab.ts.routing, "topology": topo.name(),
                     "cookie": f"{fab.cookie:016x}", "version": fab.version,
                     "profile": fab.profile, "switches": topo.n_switches,
                     "connected": len(states), "verified": states.count("verified"),
                     "failed": states.count("failed"), "refusals": fab.refusals}
    for d, st in sorted(fab.switches.items()):
        out["switches"].append({
            "switch": st.switch, "dpid": f"{d:016x}", "state": st.state,
            "verified": st.state == "verified", "flows": len(st.program.flows),
            "groups": len(st.program.groups), "digest": program_digest(st.program),
            "repairs": st.repairs, "errors": st.errors, "flow_mods": st.flow_mods,
            "group_mods": st.group_mods, "read_at": st.read_at})
    intact = view.links.intact if view.links is not None else topo
    dec = fab.decisions
    occ = None
    if dec is not None:
        occ = dec.est.occupancy(time.monotonic() if now is None else now)
    for d, (t, stats) in sorted(view.ports.items()):
        u = fab.switch_of(d)
        if u is None:
            continue
        for s in stats:
            no = int(s.port_no)
            if no >= 0xFFFFFF00:        # LOCAL and the other reserved ports
                continue
            planned = fab.plan_port(u, no)
            rec = {"switch": u, "dpid": f"{d:016x}", "port": no,
                   "peer": "" if planned is None or planned > intact.hosts[u] + intact.radix
                   else _peer(intact, u, planned),
                   "rx_bytes": s.rx_bytes, "tx_bytes": s.tx_bytes,
                   "rx_packets": s.rx_packets, "tx_packets": s.tx_packets,
                   "rx_dropped": s.rx_dropped, "tx_dropped": s.tx_dropped, "time": t,
                   "load": None, "queue": None}
            j = -1 if planned is None else intact.port_index(u, planned)
            if dec is not None and 0 <= j < topo.radix:
                rho, q = float(dec.est.rho[u, j]), float(occ[u, j])
                rec["load"] = None if np.isnan(rho) else rho
                rec["queue"] = None if np.isnan(q) else q
            out["ports"].append(rec)
    if dec is not None:
        ug = dec.ugal
        frac = ug.fraction()
        pairs = None
        if ug.valid.size <= PAIRS_MAX:
            pairs = [(int(u), int(k), float(frac[u, k])) for u, k in zip(*np.nonzero(ug.valid))]
        out["ugal"] = {"keys": ug.keys, "rounds": dec.rounds, "flow_mods": dec.flow_mods,
                       "changed": dec.last["changed"] if dec.last else 0,
                       "reversals": dec.reversals, "reversals_total": dec.reversals_total,
                       "share": float(frac[ug.valid].mean()) if ug.valid.any() else 0.0,
                       "by_destination": [float(x) for x in ug.by_destination()],
                       "pairs": pairs, "stale": sorted(dec.stale),
                       "readbacks_equal": dec.readbacks_equal,
                       "readbacks_differing": dec.readbacks_differing}
    return out


class Metrics:
    """The controller's Prometheus registry: :meth:`collect` reads ``view()`` at every
    scrape; the two histograms are fed by :meth:`update_done`."""

    def __init__(self, view: Callable[[], View]):
        self.view = view
        self.registry = CollectorRegistry(auto_describe=False)
        self.update_seconds = Histogram(
            "fabroute_update_seconds", "Live updates: start to every switch verified",
            ["kind", "mode"], buckets=UPDATE_BUCKETS, registry=self.registry)
        self.repair_seconds = Histogram(
            "fabroute_repair_seconds", "Cable repairs: port event to the new tables in "
            "force (event down: routed around; up: restored)", ["event"],
            buckets=REPAIR_BUCKETS, registry=self.registry)
        self.registry.register(self)

    def update_done(self, kind: str, rep: dict) -> None:
        """A live update ended with report ``rep`` (``kind``: ``load`` or ``links``)."""
        if "t_verified" in rep and "t_start" in rep:
            self.update_seconds.labels(kind, rep.get("mode", "")).observe(
                rep["t_verified"] - rep["t_start"])
        if kind == "links" and "t_in_force" in rep and "t_event" in rep:
            event = "up" if str(rep.get("reason", "")).endswith(" up") else "down"
            self.repair_seconds.labels(event).observe(rep["t_in_force"] - rep["t_event"])

    def render(self, pause: Callable[[], None] | None = None) -> bytes:
        """The text exposition format, as ``/metrics`` serves it (:func:`exposition`);
        ``pause()`` is called between families."""
        return exposition(self.registry, pause)

    def collect(self):
        snap = snapshot(self.view())
        yield from _role_families(snap)
        yield from _update_families(snap)
        yield from _failure_families(snap)
        if snap["fabric"] is None:
            return
        yield from _fabric_families(snap)
        yield from _switch_families(snap)
        yield from _port_families(snap)
        if snap["ugal"] is not None:
            yield from _ugal_families(snap["ugal"])


def _gauge(name, doc, labels=(), rows=(), value=None):
    g = GaugeMetricFamily(name, doc, value=value, labels=None if value is not None else labels)
    for lv, v in rows:
        g.add_metric(lv, v)
    return g


def _counter(name, doc, labels=(), rows=(), value=None):
    c = CounterMetricFamily(name, doc, value=value,
                            labels=None if value is not None else labels)
    for lv, v in rows:
        c.add_metric(lv, v)
    return c


def _role_families(snap):
    r = snap["role"]
    yield _gauge("fabroute_role_info", "This controller's role (single, master, standby) "
                 "and state (master, standby, deposed)", ["role", "state"],
                 [([r["role"], r["state"]], 1)])
    yield _gauge("fabroute_master", "1 while this controller writes to the switches",
                 value=1 if r["state"] == "master" else 0)


def _update_families(snap):
    u = snap["update"]
    yield _counter("fabroute_updates", "Live updates done (loads and cable repairs)",
                   value=u["count"])
    yield _gauge("fabroute_update_running", "1 while a live update runs", value=int(u["running"]))
    yield _gauge("fabroute_update_held", "1 while a rewiring update waits for its cables",
                 value=int(u["held"]))
    yield _gauge("fabroute_update_phase_info", "The running update's mode and phase",
                 ["mode", "phase"], [([u["kind"], u["phase"] or ""], 1)] if u["running"] and
                 u["kind"] else [])
    last = u["last"]
    if last and last.get("phases"):
        yield _gauge("fabroute_last_update_phase_seconds", "The last live update's phases",
                     ["mode", "phase"], [([last.get("mode", ""), p["name"]], p["seconds"])
                                         for p in last["phases"]])
    if last and "t_verified" in last and "t_start" in last:
        yield _gauge("fabroute_last_update_seconds", "The last live update: start to every "
                     "switch verified", ["mode", "ok"],
                     [([last.get("mode", ""), str(bool(last.get("ok"))).lower()],
                       last["t_verified"] - last["t_start"])])
        yield _gauge("fabroute_last_update_timestamp_seconds", "When the last live update "
                     "was verified (unix time)", value=last["t_verified"])


def _failure_families(snap):
    f = snap["failures"]
    yield _gauge("fabroute_cables_down", "Failed cables (the started set's and those with a "
                 "port down)", value=len(f["cables"]))
    yield _gauge("fabroute_cable_down", "1 per failed cable (a switch pair)",
                 ["switch_a", "switch_b"], [([str(a), str(b)], 1) for a, b in f["cables"]])
    p = f.get("prepared")
    if p is not None:
        yield _gauge("fabroute_prepared_repairs", "Single-cable repairs made ready while idle",
                     value=p["ready"])
        yield _gauge("fabroute_prepared_bytes", "Bytes those prepared repairs hold",
                     value=p["bytes"])


def _fabric_families(snap):
    f = snap["fabric"]
    yield _gauge("fabroute_fabric_info", "The table set served", ["routing", "topology",
                 "cookie", "profile", "version"], [([f["routing"], f["topology"], f["cookie"],
                                                     f["profile"], str(f["version"])], 1)])
    for key, doc in (("switches", "Switches of the fabric"),
                     ("connected", "Switches connected"), ("verified", "Switches verified"),
                     ("failed", "Switches still differing after every repair round")):
        yield _gauge(f"fabroute_switches_{key}" if key != "switches" else "fabroute_switches",
                     doc, value=f[key])
    yield _counter("fabroute_refusals", "Datapaths refused (not of the fabric, wrong ports "
                   "or certificate)", value=f["refusals"])


def _switch_families(snap):
    rows = snap["switches"]
    ids = [[str(s["switch"]), s["dpid"]] for s in rows]
    lab = ["switch", "dpid"]
    yield _gauge("fabroute_switch_program_info", "The program each switch must hold: digest "
                 "(SHA-256 of its flows and groups, 16 hex digits) and state",
                 lab + ["digest", "state"], [(i + [s["digest"], s["state"]], 1)
                                             for i, s in zip(ids, rows)])
    yield _gauge("fabroute_switch_verified", "1 when the switch's read-back equals its program",
                 lab, [(i, int(s["verified"])) for i, s in zip(ids, rows)])
    yield _gauge("fabroute_switch_flows", "Flow entries of the switch's program", lab,
                 [(i, s["flows"]) for i, s in zip(ids, rows)])
    yield _gauge("fabroute_switch_groups", "Group entries of the switch's program", lab,
                 [(i, s["groups"]) for i, s in zip(ids, rows)])
    yield _gauge("fabroute_switch_last_readback_timestamp_seconds", "When the switch's tables "
                 "were last read back (unix time)", lab,
                 [(i, s["read_at"]) for i, s in zip(ids, rows) if s["read_at"] is not None])
    for key, doc in (("repairs", "Repair rounds on this connection"),
                     ("errors", "OpenFlow error replies on this connection"),
                     ("flow_mods", "Flow adds and strict deletes sent on this connection")):
        yield _counter(f"fabroute_switch_{key}", doc, lab,
                       [(i, s[key]) for i, s in zip(ids, rows)])


_PORT_COUNTERS = (("rx_bytes", "port_received_bytes", "Bytes received"),
                  ("tx_bytes", "port_transmitted_bytes", "Bytes transmitted"),
                  ("rx_packets", "port_received_packets", "Packets received"),
                  ("tx_packets", "port_transmitted_packets", "Packets transmitted"),
                  ("rx_dropped", "port_receive_dropped_packets", "Packets dropped on receive"),
                  ("tx_dropped", "port_transmit_dropped_packets",
                   "Packets dropped on transmit"))


def _port_families(snap):
    rows = snap["ports"]
    lab = ["switch", "dpid", "port", "peer"]
    ids = [[str(p["switch"]), p["dpid"], str(p["port"]), p["peer"]] for p in rows]
    for key, name, doc in _PORT_COUNTERS:
        yield _counter(f"fabroute_{name}", f"{doc} (the switch's port statistics)", lab,
                       [(i, p[key]) for i, p in zip(ids, rows)])
    yield _gauge("fabroute_port_stats_timestamp_seconds", "When the port statistics were "
                 "read (unix time)", lab, [(i, p["time"]) for i, p in zip(ids, rows)])
    yield _gauge("fabroute_port_load_ratio", "UGAL-L's estimate of the offered load of a "
                 "network port (EWMA of (sent + dropped) / capacity per poll)", lab,
                 [(i, p["load"]) for i, p in zip(ids, rows) if p["load"] is not None])
    yield _gauge("fabroute_port_queue_packets", "UGAL-L's estimate of the packets queued at "
                 "a network port (M/M/1/B at that load)", lab,
                 [(i, p["queue"]) for i, p in zip(ids, rows) if p["queue"] is not None])


def _ugal_families(ug):
    yield _counter("fabroute_ugal_rounds", "UGAL-L decision rounds", value=ug["rounds"])
    yield _counter("fabroute_ugal_decision_flow_mods", "Decision entries modified",
                   value=ug["flow_mods"])
    yield _gauge("fabroute_ugal_changed_shares", "Shares moved in the last round",
                 value=ug["changed"])
    yield _gauge("fabroute_ugal_reversals", "Shares moved against their previous move in "
                 "the last round", value=ug["reversals"])
    yield _counter("fabroute_ugal_share_reversals", "Shares moved against their previous "
                   "move, all rounds", value=ug["reversals_total"])
    yield _gauge("fabroute_ugal_share_mean_ratio", "Mean non-minimal share over every "
                 "(source, destination)", value=ug["share"])
    yield _gauge("fabroute_ugal_destination_share_ratio", "Mean non-minimal share per "
                 f"destination key ({ug['keys']}) over its sources", ["destination"],
                 [([str(k)], v) for k, v in enumerate(ug["by_destination"])])
    if ug["pairs"] is not None:
        yield _gauge("fabroute_ugal_share_ratio", "Non-minimal share of a (source switch, "
                     f"destination {ug['keys']})", ["switch", "destination"],
                     [([str(u), str(k)], v) for u, k, v in ug["pairs"]])
    yield _gauge("fabroute_ugal_stale_switches", "Switches whose statistics aged out (their "
                 "sources take MIN)", value=len(ug["stale"]))
    yield _counter("fabroute_ugal_readbacks", "Decision read-backs", ["result"],
                   [(["equal"], ug["readbacks_equal"]),
                    (["differing"], ug["readbacks_differing"])])


def _value(v) -> str:
    v = float(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


#: label blocks already written, by their (name, value) pairs: a port's labels repeat in
#: every port family and at every scrape, so each is escaped once (bounded: a fabric's ids)
_LABELS: dict = {}
_LABELS_MAX = 1 << 17


def _label_block(labels: dict) -> str:
    key = tuple(labels.items())
    block = _LABELS.get(key)
    if block is None:
        if len(_LABELS) >= _LABELS_MAX:
            _LABELS.clear()
        block = _LABELS[key] = ",".join(f'{k}="{_escape(str(v))}"' for k, v in key)
    return block


def exposition(registry, pause: Callable[[], None] | None = None) -> bytes:
    """Prometheus' text format (0.0.4) of every family of ``registry``, as
    ``prometheus_client.generate_latest`` writes it less the ``_created`` samples (the time a
    series was made, which no panel reads).  Own code because the library's validates and
    escapes every label name of every sample: 0.1 s for Slim Fly q = 5's 6,700 samples on this
    machine, spent in the controller's hub while events wait; the names here are fixed and
    valid, only label values need escaping (``tests/test_metrics.py`` parses both alike).
    ``pause()``, when given, is called after each family: the hub's other green threads run
    there, so a decision round due during a scrape waits for one family, not for all of them
    (the state was read into a snapshot before the first family: nothing they change shows
    half-way in this scrape)."""
    out = []
    for fam in registry.collect():
        if pause is not None and out:
            pause()
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        doc = fam.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {fam.type}\n")
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            if s.labels:
                out.append(f"{s.name}{{{_label_block(s.labels)}}} {_value(s.value)}\n")
            else:
                out.append(f"{s.name} {_value(s.value)}\n")
    return "".join(out).encode()


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def serve(sock, metrics: Metrics) -> None:
    """Serve ``/metrics`` on the listening green socket ``sock`` forever (eventlet's WSGI
    server, so a scrape runs in the controller's hub between events: no thread reads the
    state while an event changes it; it reads it at once, then writes the text family by
    family with the hub free to run between them)."""
    import logging

    from eventlet import sleep, wsgi

    def only_metrics(environ, start_response):
        if environ.get("PATH_INFO") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics here\n"]
        body = metrics.render(pause=lambda: sleep(0))
        start_response("200 OK", [("Content-Type", CONTENT_TYPE),
                                  ("Content-Length", str(len(body)))])
        return [body]

    wsgi.server(sock, only_metrics, log=logging.getLogger("fabroute.metrics"),
                log_output=False)
