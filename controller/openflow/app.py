"""The os-ken application: a thin shell around :class:`controller.openflow.fabric.Fabric`.

It turns OpenFlow events into calls on the fabric and sends what the fabric returns:
switch features → read the switch's flow and group tables; complete replies → compare,
then either *verified* or repair + barrier + read again; errors and disconnects are logged.
After every change the fabric's status is written (atomically) to ``FabrouteApp.status_path``
when set, which is how ``fabroute emulate`` learns that every switch holds its tables.

Adaptive UGAL-L (``fabric.decisions`` set): every ``poll`` seconds a decision round runs on
the statistics gathered since the last one, the changed decision entries go to each
verified switch as MODIFYs plus a barrier, and those destinations' decision entries are
read back (table 0, filtered by destination) and compared (a difference starts the usual
repair); then every verified switch is asked for its port and
queue statistics.  A switch being read or repaired gets its decisions when it is verified
(they become its program when they are sent, so every read-back is compared with what the
switch was sent).  Each round is appended as one JSON line to
``FabrouteApp.decisions_path`` when set.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from controller.openflow.fabric import Fabric, SwitchState, generation_cookie
from controller.openflow.lldpapp import LldpMixin
from controller.openflow.messages import error_names
from controller.openflow.prepared import PREPARE_BYTES, PREPARE_IDLE_S, Prepared
from controller.openflow.roleapp import RoleMixin
from controller.openflow.update import Links, Update, control_tables
from controller.tls import dpid_ranges
from tablegen.errors import BadInput
from tablegen.exports.openflow import T_DECIDE, T_EGRESS
from tablegen.limits import DRAIN_S

HOLD_S = 300          # a held rewiring update flips after this long without a resume


class FabrouteApp(RoleMixin, LldpMixin, app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    fabric: Fabric | None = None          # set by the launcher before the app starts
    status_path: Path | None = None
    decisions_path: Path | None = None
    control = None                        # a listening Unix socket (``--control``), or None
    drain: float = DRAIN_S                # two-phase updates: the old version's drain time
    prepare_bytes: int = PREPARE_BYTES    # repairs made ready while idle (0: none)
    repair_links: bool = True             # port down/up: route around / restore the cable
    learner = None                        # real switches: controller.openflow.learn.Learner
    metrics_sock = None                   # a listening socket for /metrics (``--metrics``)
    metrics_poll: float = 1.0             # port statistics for /metrics and the map w/o UGAL-L
    web_sock = None                       # a listening socket for the live map (``--web``)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # by dpid, for the switch's current connection only (Fabric.current)
        self._reads: dict[int, dict] = {}     # {"flows": [...], "groups": [...], "pending"}
        self._ports: dict[int, list] = {}
        self._stats: dict[int, dict] = {}     # statistics replies being gathered
        # MODIFYs sent, barrier or read-back pending: the destinations (eth_dst prefixes)
        # whose decision entries are read back
        self._deciding: dict[int, list] = {}
        self._later: dict[int, dict] = {}     # decision entries waiting for a busy switch
        self._queues: dict[int, list] = {}    # the latest queue statistics of each switch
        # live updates: barrier replies awaited by phase (dpid -> (xid, event)), one update
        # at a time from the queue, the last one's report
        self._waits: dict[int, tuple] = {}
        self._updates = hub.Queue()
        self._updating = False
        self._phase: str | None = None        # the running update's phase (metrics)
        self._mode: str | None = None
        self._counters: dict[int, tuple] = {}     # dpid -> (unix time, [OFPPortStats])
        self._last_update: dict | None = None
        self._update_count = 0
        self._resume = None                   # a held rewiring update waits on it
        self._rewiring = False                # a renumbering update runs (ports will move)
        self._resumed = None                  # the resume request's reply queue
        self._links = Links(self.fabric.ts) if self.fabric is not None else None
        self.prepared = Prepared(self.prepare_bytes, self.drain)
        if self.fabric is not None:
            hub.spawn(self._updater)
            hub.spawn(self._prepare_loop)
        if self.control is not None:
            hub.spawn(self._serve_control)
        self._dps: dict[int, object] = {}     # map mode: every connection, mapped or not
        self._discovering: set[int] = set()   # datapaths waiting for the map
        if self.learner is not None:
            if self.learner.assignment is not None:     # --fabric FILE: mapped already
                self.fabric = self._mapped_fabric()
            hub.spawn(self._lldp_loop)
        self._log = None
        self.metrics = None
        if self.metrics_sock is not None:
            from controller.openflow.metrics import Metrics, serve

            self.metrics = Metrics(self.metrics_view)
            hub.spawn(serve, self.metrics_sock, self.metrics)
        self.web = None
        if self.web_sock is not None:
            self._start_web()
        if self.fabric is not None and self.fabric.decisions is not None:
            if self.decisions_path:
                self._log = open(self.decisions_path, "a", buffering=1)
            hub.spawn(self._poll_loop)
        elif self.fabric is not None and (self.metrics is not None or self.web is not None):
            hub.spawn(self._poll_loop)      # port statistics for /metrics and the map only
        self._start_roles()

    # -- events --------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        why = self.fabric.check_certificate(dp.id, self._certificate_dpids(dp))
        if why is not None:
            self._refuse(dp, why)
            return
        if self.learner is not None:
            self._dps[dp.id] = dp
            self.learner.seen(dp.id)
            if self.learner.assignment is None:     # ports, then LLDP: the cabling
                self._discovering.add(dp.id)
                dp.send_msg(dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0))
                self._write_status()
                return
        st = self.fabric.connected(dp.id, dp)
        if st is None and self.learner is not None:
            self._refuse(dp, f"refused datapath {dp.id:016x}: not a switch of the mapped "
                         f"fabric ({len(self.learner.assignment.switch)} datapaths)")
            return
        if st is None:
            why = (f"refused datapath {dp.id:016x}: not a switch of {self.fabric.topo.name()} "
                   f"(expected dpid 1..{self.fabric.topo.n_switches})")
            self._refuse(dp, why)
            return
        self._ports[dp.id] = []
        self._later.pop(dp.id, None)        # its program already holds the decisions of now
        self.logger.info("switch %d (dpid %016x) connected; checking its ports", st.switch,
                         dp.id)
        dp.send_msg(dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0))

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _port_desc(self, ev):
        dp = ev.msg.datapath
        if self.learner is not None and self._lldp_ports(ev.msg):
            return
        st = self.fabric.current(dp.id, dp)
        if st is None or dp.id not in self._ports:
            return
        self._ports[dp.id] += ev.msg.body
        if ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            return
        ports = self._ports.pop(dp.id)
        why = self.fabric.check_ports(st.switch, [p.port_no for p in ports])
        if why is not None:
            self.fabric.refuse(dp.id)
            self._refuse(dp, f"refused datapath {dp.id:016x}: {why}")
            return
        if self.fabric.decisions is not None:
            self.fabric.decisions.port_speeds(st.switch, ports)
        if self.learner is not None:
            self._port_list(dp, ports)
            self._probe(dp)
        missing = self.fabric.missing_ports(st.switch, [p.port_no for p in ports])
        self.logger.info("switch %d ports match%s; reading its tables", st.switch,
                         f" (cables not plugged yet: ports {missing})" if missing else "")
        self._read(dp)

    def _refuse(self, dp, why: str):
        self.logger.error(why)
        self.fabric.note_refusal(why)
        self._write_status()
        dp.close()

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        self._collect(ev.msg, "flows")

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    def _group_desc(self, ev):
        self._collect(ev.msg, "groups")

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev):
        dp = ev.msg.datapath
        wait = self._waits.get(dp.id)
        if wait is not None and wait[0] == ev.msg.xid:      # a phase of a live update
            del self._waits[dp.id]
            wait[1].set()
            return
        if self.fabric.current(dp.id, dp) is None:
            return
        if dp.id in self._deciding:
            self._read_decisions(dp, self._deciding[dp.id])
        else:
            self._read(dp)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        m = ev.msg
        dpid = m.datapath.id
        switch = self.fabric.switch_of(dpid) if dpid is not None else None
        self.logger.error("switch %s (dpid %016x) OpenFlow error type=%d code=%d (%s)",
                          "?" if switch is None else switch, dpid or 0, m.type, m.code,
                          error_names(m.type, m.code))
        st = self.fabric.current(dpid, m.datapath)
        if st is not None:
            st.errors += 1
            self._write_status()

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _dead(self, ev):
        dp = ev.datapath
        if dp.id is not None and self.learner is not None and dp.id in self._discovering \
                and self._dps.get(dp.id) is dp:
            self._discovering.discard(dp.id)
            self._dps.pop(dp.id, None)
            self.learner.cabling.gone(dp.id)
            self.logger.warning("datapath %016x disconnected before the map", dp.id)
        if dp.id is None or self.fabric.switch_of(dp.id) is None:
            return
        st = self.fabric.disconnected(dp.id, dp)
        if st is None:
            self.logger.info("switch %d (dpid %016x): a replaced connection closed; the "
                             "current one stays", self.fabric.switch_of(dp.id), dp.id)
            return
        if self.learner is not None:
            self.learner.cabling.gone(dp.id)
            self._dps.pop(dp.id, None)
        self.logger.warning("switch %d (dpid %016x) disconnected", st.switch, dp.id)
        self._reads.pop(dp.id, None)
        self._ports.pop(dp.id, None)
        self._stats.pop(dp.id, None)
        self._queues.pop(dp.id, None)
        self._counters.pop(dp.id, None)
        self._deciding.pop(dp.id, None)
        self._later.pop(dp.id, None)
        self._write_status()

    def _certificate_dpids(self, dp):
        """The datapath ids the peer's TLS certificate carries; ``None`` over plain TCP."""
        getpeercert = getattr(dp.socket, "getpeercert", None)
        return None if getpeercert is None else dpid_ranges(getpeercert())

    # -- read / compare / repair ---------------------------------------------------------------
    def _read(self, dp):
        """Read the flow and group tables, a request per pipeline table (ofsoftswitch13 puts
        a reply in one message, whose 16-bit length wraps past 64 KiB; no goto reaches others)."""
        p, o = dp.ofproto_parser, dp.ofproto
        self._reads[dp.id] = {"flows": [], "groups": [], "dsts": None, "left": T_EGRESS + 1,
                              "pending": {"flows", "groups"}}
        for t in range(T_EGRESS + 1):
            dp.send_msg(p.OFPFlowStatsRequest(dp, 0, t, o.OFPP_ANY, o.OFPG_ANY, 0, 0,
                                              p.OFPMatch()))
        dp.send_msg(p.OFPGroupDescStatsRequest(dp, 0))

    def _read_decisions(self, dp, dsts: list):
        """Read back the decision entries of destinations ``dsts`` (one table-0 request
        filtered by each destination's ``eth_dst`` prefix: a few entries each instead of
        the whole table)."""
        p, o = dp.ofproto_parser, dp.ofproto
        self._reads[dp.id] = {"flows": [], "groups": [], "dsts": dsts, "left": len(dsts),
                              "pending": {"flows"}}
        for dst in dsts:
            dp.send_msg(p.OFPFlowStatsRequest(dp, 0, T_DECIDE, o.OFPP_ANY, o.OFPG_ANY, 0, 0,
                                              p.OFPMatch(eth_dst=dst)))

    def _collect(self, m, kind: str):
        r = self._reads.get(m.datapath.id)
        if r is None or self.fabric.current(m.datapath.id, m.datapath) is None:
            return
        r[kind] += m.body
        if not m.flags & m.datapath.ofproto.OFPMPF_REPLY_MORE:
            if kind == "flows":
                r["left"] -= 1
            if kind != "flows" or r["left"] == 0:
                r["pending"].discard(kind)
        if not r["pending"]:
            del self._reads[m.datapath.id]
            self._judge(m.datapath, r["flows"], r["groups"], r["dsts"])

    def _judge(self, dp, flows, groups, dsts=None):
        fab = self.fabric
        st = fab.switches[dp.id]
        st.read_at = time.time()
        if dsts is None and self._adopts(dp.id) and fab.adopt(st.switch, flows):
            st.program = fab.program(st.switch)      # the master's decisions, held
        diff = fab.compare(st.switch, flows, groups, eth_dst=dsts)
        if dsts is not None:                          # the read-back of decisions
            del self._deciding[dp.id]
            if diff.empty:
                fab.decisions.readbacks_equal += 1
                self._send_later(dp)
                return
            fab.decisions.readbacks_differing += 1
            self.logger.warning("switch %d: decision entries differ after MODIFY: %s; "
                                "reading everything", st.switch, diff.summary())
            later = self._later.pop(dp.id, None)      # the repair installs them too
            if later:
                fab.decided(st.switch, list(later.values()))
            self._read(dp)
            return
        if not self._writes():                        # a standby: its view, nothing sent
            self._viewed(st, diff)
            return
        verdict = fab.verdict(dp.id, diff)
        if verdict == "verified":
            self.logger.info("switch %d verified: %d flows, %d groups; sent %d flow-mods, "
                             "%d group-mods", st.switch, len(st.program.flows),
                             len(st.program.groups), st.flow_mods, st.group_mods)
            self._send_later(dp)            # decisions taken while it was read or repaired
        elif verdict == "failed":
            self.logger.error("switch %d still differs after %d repairs: %s", st.switch,
                              st.repairs, diff.summary())
        else:
            log = self.logger.info if st.repairs == 1 else self.logger.warning
            log("switch %d differs from its program (round %d): %s; repairing", st.switch,
                st.repairs, diff.summary())
            for msg in fab.repair(dp.id, diff):
                msg.datapath = dp
                dp.send_msg(msg)
            dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
        self._write_status()
        # os-ken's event loop takes queued events without yielding: with hundreds of switches
        # reading back at once, comparing and repairing them back to back held the hub for
        # over 5 s, and Open vSwitch dropped connections whose echo went unanswered
        hub.sleep(0)

    # -- adaptive UGAL-L ------------------------------------------------------------------------
    def _poll_loop(self):
        dec = self.fabric.decisions
        while True:
            hub.sleep(dec.poll if dec is not None else self.metrics_poll)
            try:
                self._round()
            except Exception:        # a round must never end the loop; logged (rate-limited)
                self.logger.exception("decision round failed")

    def _round(self):
        fab = self.fabric
        if self._updating or (fab.decisions is None and self.metrics is None
                              and self.web is None):
            return      # decisions are stamp entries: not while an update flips them
        if fab.decisions is not None and self._writes():
            self._decide(fab)   # a standby only gathers: warm estimates when it takes over
        for dp_id, st in list(fab.switches.items()):
            if st.state == "verified" and dp_id not in self._stats:
                self._ask_stats(st.conn)
        if fab.decisions is not None:
            self._write_status()

    def _decide(self, fab):
        changes, newly = fab.decisions.decide(time.monotonic())
        for u in newly:
            self.logger.warning("switch %d answered no statistics for %.1f s: its decisions "
                                "fall back to MIN", u, fab.decisions.p.max_age * fab.decisions.poll)
        for u, flows in changes.items():
            d = fab.dpid_of(u)
            st = fab.switches.get(d)
            if st is None:      # not connected: it connects to a program with the shares of then
                continue
            # the decisions become the program when they are sent, so a read-back in flight
            # is compared with what the switch was sent
            later = self._later.setdefault(d, {})
            for f in flows:
                later[(f.match, f.priority)] = f
            if st.state == "verified" and d not in self._deciding and d not in self._reads:
                self._send_later(st.conn)
        if self._log is not None:
            self._log.write(json.dumps(fab.decisions.last) + "\n")

    def _send_later(self, dp):
        """Send the decision MODIFYs waiting for ``dp``, then a barrier (its reply starts the
        table-0 read-back)."""
        later = self._later.pop(dp.id, None)
        if not later:
            return
        st = self.fabric.switches[dp.id]
        flows = list(later.values())
        # marked before sending: send_msg may yield to the poll loop, which must not send
        # this switch another batch before this one is read back
        self._deciding[dp.id] = sorted({dict(f.match)["eth_dst"] for f in flows})
        for m in self.fabric.decided(st.switch, flows):
            m.datapath = dp
            dp.send_msg(m)
        dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))

    def _ask_stats(self, dp):
        """Port statistics (the estimator's input) and queue statistics (the drops of tc
        classes where a port has a QoS row; their latest reply goes with the next port
        statistics)."""
        p, o = dp.ofproto_parser, dp.ofproto
        self._stats[dp.id] = {"ports": [], "queues": [], "pending": {"ports", "queues"}}
        dp.send_msg(p.OFPPortStatsRequest(dp, 0, o.OFPP_ANY))
        dp.send_msg(p.OFPQueueStatsRequest(dp, 0, o.OFPP_ANY, o.OFPQ_ALL))

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        self._gather(ev.msg, "ports")

    @set_ev_cls(ofp_event.EventOFPQueueStatsReply, MAIN_DISPATCHER)
    def _queue_stats(self, ev):
        self._gather(ev.msg, "queues")

    def _gather(self, m, kind: str):
        dp = m.datapath
        r = self._stats.get(dp.id)
        st = self.fabric.current(dp.id, dp)
        if r is None or st is None or kind not in r["pending"]:
            return
        r[kind] += m.body
        if m.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            return
        r["pending"].discard(kind)
        if kind == "queues":
            self._queues[dp.id] = r["queues"]
        else:
            self._counters[dp.id] = (time.time(), r["ports"])
            if self.fabric.decisions is not None:
                self.fabric.decisions.stats(st.switch, time.monotonic(), r["ports"],
                                            self._queues.get(dp.id, ()))
        if not r["pending"]:
            del self._stats[dp.id]

    # -- live updates ----------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        m = ev.msg
        dp, d, o = m.datapath, m.desc, m.datapath.ofproto
        up = (m.reason != o.OFPPR_DELETE and not d.state & o.OFPPS_LINK_DOWN
              and not d.config & o.OFPPC_PORT_DOWN)
        if self.learner is not None and self._dps.get(dp.id) is dp:
            if self.learner.cabling.port(dp.id, d.port_no, up, d.hw_addr) and up:
                self._probe(dp, d.port_no)          # a new cable is heard at once
        st = self.fabric.current(dp.id, dp)
        if st is None or not self.repair_links or self._rewiring:
            return          # (cables move while a renumbering update runs: not failures)
        port = self.fabric.plan_port(st.switch, d.port_no)
        if port is not None and self._links.port(st.switch, port, up):
            t_event = time.time()
            if self.web is not None:    # the map shows it before the repair is computed:
                self.web.wake()         # the push, then its writes run before the updater
                hub.sleep(0)
            self.logger.warning("switch %d port %d %s: failed cables now %s", st.switch,
                                d.port_no, "up" if up else "down",
                                sorted(self._links.failed()) or "none")
            if self._writes():      # a standby only follows: its takeover routes around
                self._updates.put(("links", f"switch {st.switch} port {d.port_no} "
                                   f"{'up' if up else 'down'}", t_event, None))

    def _updater(self):
        """Apply the queued updates one at a time: a table directory loaded over the control
        socket, or the tables of the cables that work now (port events coalesce: the target
        is computed when the update starts)."""
        while True:
            kind, why, t_event, reply = self._updates.get()
            relabel = None
            try:
                if kind == "load":
                    ts, relabel = why
                    old = self._links
                    self._links = Links(ts)
                    if relabel is None:         # ports keep their meaning: so do port states
                        self._links.down = old.down
                    why = f"load {ts.topo.name()} ({ts.routing})"
                live = [st.switch for st in self.fabric.switches.values()
                        if st.state == "verified"]
                ready = None if kind == "load" else \
                    self.prepared.take(self.fabric, self._links.failed(), live)
                target = ready.update.new.ts if ready else self._links.target()
                if target is self.fabric.ts or generation_cookie(target) == self.fabric.cookie:
                    rep = {"ok": True, "mode": "none", "reason": why, "changed": False}
                else:
                    rep = self._apply(target, why, t_event, relabel, reply, ready)
            except Exception as e:        # reported, never the end of the loop
                self.logger.exception("update failed")
                rep = {"ok": False, "reason": why, "error": f"{type(e).__name__}: {e}"}
            self._last_update = rep
            self._update_count += 1
            if self.metrics is not None:
                self.metrics.update_done(kind, rep)
            self._write_status()
            if rep.pop("_replied", False):      # a rewiring update answered when it held
                reply = self._resumed
                self._resumed = None
            if reply is not None:
                reply.put(rep)

    def _hold(self, rep: dict, reply) -> None:
        """A rewiring update holds (no host injects, nothing in flight): answer the request
        that started it, then wait until a ``resume`` request says the cables are moved (at
        most :data:`HOLD_S`; then the flip goes ahead and what the missing cables carry is
        lost)."""
        rep["t_held"] = time.time()
        self._resume = hub.Event()
        if reply is not None:
            reply.put(dict(rep, held=True))
            rep["_replied"] = True
        self._write_status()
        if not self._resume.wait(HOLD_S):
            self.logger.error("update held %d s without a resume; flipping", HOLD_S)
        self._resume = None
        rep["t_resumed"] = time.time()

    def _apply(self, target, why: str, t_event: float, relabel=None, reply=None,
               ready=None) -> dict:
        upd = ready.update if ready else Update(self.fabric, target, drain=self.drain,
                                                relabel=relabel)
        old = self.fabric
        self.logger.warning("update (%s): %s, %s -> %s", why, upd.mode, old.topo.name(),
                            target.topo.name())
        live = {st.switch: st for st in old.switches.values() if st.state == "verified"}
        rep = dict(upd.summary(), ok=True, reason=why, t_event=t_event, t_start=time.time(),
                   switches=len(live), phases=[], prepared=ready is not None)
        self._updating = True
        self._mode = upd.mode
        self._rewiring = relabel is not None
        try:
            phases = ready.phases_for(sorted(live)) if ready else upd.phases(sorted(live))
            rep["t_planned"] = time.time()
            t_start = time.monotonic()
            for ph in phases:
                self._phase = ph.name
                t0 = time.monotonic()
                late, sent_s = self._send_phase(ph, {old.dpid_of(u): st
                                                     for u, st in live.items()})
                rep["phases"].append({"name": ph.name, "messages": ph.count(),
                                      "switches": len(ph.msgs), "unanswered": late,
                                      "sent_s": round(sent_s, 4),
                                      "started_s": round(t0 - t_start, 4),
                                      "seconds": round(time.monotonic() - t0, 4)})
                rep["t_last_flow_mod"] = time.time()
                if ph.name in ("flip", "delete"):    # the new program is in force
                    rep["t_in_force"] = rep["t_last_flow_mod"]
                if ph.wait:
                    hub.sleep(ph.wait)
                if ph.pause:
                    self._hold(rep, reply)
            new = upd.new
            if old.adapted is not None and new.plan_.decide is not None:
                new.adapt(*old.adapted)
                new.decisions.inherit(old.decisions)   # the switches keep theirs
            for dp_id, st in old.switches.items():
                u = new.switch_of(dp_id)
                new.switches[dp_id] = SwitchState(u, new.program(u), state="reading",
                                                  conn=st.conn)
            self.fabric = new
            self._later.clear()
            self._deciding.clear()
            for st in list(new.switches.values()):
                self._read(st.conn)            # read back: verified against the new program
        finally:
            self._updating = self._rewiring = False
            self._phase = self._mode = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                st.state in ("reading", "repairing") for st in self.fabric.switches.values()):
            hub.sleep(0.02)
        states = [st.state for st in self.fabric.switches.values()]
        rep.update(t_verified=time.time(), verified=states.count("verified"),
                   failed=states.count("failed"),
                   repairs=sum(st.repairs for st in self.fabric.switches.values()))
        rep["ok"] = rep["failed"] == 0 and all(not p["unanswered"] for p in rep["phases"])
        self.logger.warning("update done: %s", json.dumps(rep))
        return rep

    def _send_phase(self, ph, states: dict) -> tuple[int, float]:
        """Send each switch its messages of phase ``ph`` and a barrier; wait for every
        barrier reply (10 s at most).  Returns how many did not come, and the seconds the
        sending took."""
        events = []
        t0 = time.monotonic()
        for d, msgs in ph.msgs.items():
            dp = states[d].conn
            if isinstance(msgs, bytes):         # a prepared repair: serialised already
                dp.send(msgs)
                states[d].flow_mods += ph.counts[d]
            else:
                buf = bytearray()
                for m in msgs:
                    m.datapath = dp
                    dp.set_xid(m)
                    m.serialize()
                    buf += m.buf
                dp.send(bytes(buf))        # one write per switch, not one per message
                states[d].flow_mods += len(msgs)
            barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
            ev = hub.Event()
            self._waits[dp.id] = (None, ev)
            dp.send_msg(barrier)
            self._waits[dp.id] = (barrier.xid, ev)
            events.append(ev)
        sent_s = time.monotonic() - t0
        deadline = time.monotonic() + 10
        late = 0
        for ev in events:
            if not ev.wait(max(0.0, deadline - time.monotonic())):
                late += 1
        return late, sent_s

    def _prepare_loop(self):
        """Make repairs ready (:class:`~controller.openflow.prepared.Prepared`) whenever the
        fabric has been idle a moment: every switch verified, no update running (UGAL-L's
        decisions belong to no version: a repair neither sends nor depends on them).  One
        switch of one cable per step, yielding between steps; any change starts over."""
        while True:
            hub.sleep(PREPARE_IDLE_S)
            fab = self.fabric
            live = [st.switch for st in fab.switches.values() if st.state == "verified"]
            if (self._updating or not live or len(live) < len(fab.switches)
                    or not self.prepared.stale(fab, live)):
                continue
            for _ in self.prepared.work(fab, self._links, live):
                hub.sleep(0)
                if self.fabric is not fab or self._updating:
                    break
            self._write_status()

    def _serve_control(self):
        while True:
            sock, _ = self.control.accept()
            hub.spawn(self._control_client, sock)

    def _control_client(self, sock):
        """One request per connection, one JSON line each way: ``{"load": DIR}`` (a proven
        table directory of this fabric: applied as a live update, answered when done) or
        ``{"status": true}``; a rewiring update (DSN-F ``p -> p + 1``) answers ``load`` when it
        holds and ``{"resume": true}`` when it is done."""
        with sock:
            f = sock.makefile("rwb")
            try:
                req = json.loads(f.readline() or b"{}")
                if "load" in req and not self._writes():
                    raise BadInput("controller: load: this controller is a standby; "
                                   "expected the master's --control socket")
                if "load" in req:
                    loaded = control_tables(req["load"], self.fabric.ts, self.fabric.profile)
                    reply = hub.Queue()
                    self._updates.put(("load", loaded, time.time(), reply))
                    rep = reply.get()
                elif req.get("resume"):
                    if self._resume is None:
                        raise BadInput("controller: resume: no update is holding")
                    self._resumed = hub.Queue()
                    reply = self._resumed
                    self._resume.set()
                    rep = reply.get()
                else:
                    rep = {"ok": True, "status": self.fabric.status()}
            except BadInput as e:
                rep = {"ok": False, "bad_input": True, "error": str(e)}
            except Exception as e:
                self.logger.exception("control request failed")
                rep = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            f.write(json.dumps(rep).encode() + b"\n")
            f.flush()

    def metrics_view(self):
        """What ``/metrics`` reads at a scrape (:class:`controller.openflow.metrics.View`)."""
        from controller.openflow.metrics import View

        return View(fabric=self.fabric, links=self._links, prepared=self.prepared,
                    roles=self.roles, update=self._last_update, updates=self._update_count,
                    updating=self._updating, held=self._resume is not None, kind=self._mode,
                    phase=self._phase, ports=self._counters)

    def _start_web(self):
        """Serve the live map (``--web``, controller/openflow/web.py), pushed every poll."""
        from controller.openflow.web import Web, serve

        fab = self.fabric
        topo = fab.topo if fab is not None else self.learner.base.topo
        poll = fab.decisions.poll if fab is not None and fab.decisions is not None \
            else self.metrics_poll
        self.web = Web(self.metrics_view, topo, poll)
        hub.spawn(serve, self.web_sock, self.web)
        hub.spawn(self.web.loop)

    def _write_status(self):
        if self.status_path is None:
            return
        st = self.fabric.status()
        st["update"] = self._last_update
        st["updates"] = self._update_count
        st["updating"] = self._updating
        st["held"] = self._resume is not None
        st["prepared"] = self.prepared.status()
        st["failed_links"] = sorted(map(list, self._links.failed())) if self._links else []
        if self.learner is not None:
            st["cabling"] = self.learner.status()
        st["role"] = None if self.roles is None else self.roles.status()
        tmp = self.status_path.with_name(self.status_path.name + f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(st))
        os.replace(tmp, self.status_path)
