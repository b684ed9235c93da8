"""The os-ken application: a thin shell around :class:`controller.openflow.fabric.Fabric`.

It turns OpenFlow events into calls on the fabric and sends what the fabric returns:
switch features → read the switch's flow and group tables; complete replies → compare,
then either *verified* or repair + barrier + read again; errors and disconnects are logged.
After every change the fabric's status is written (atomically) to ``FabrouteApp.status_path``
when set, which is how ``fabroute emulate`` learns that every switch holds its tables.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.ofproto import ofproto_v1_3

from controller.openflow.fabric import Fabric
from controller.openflow.messages import error_names
from controller.tls import dpid_ranges


class FabrouteApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    fabric: Fabric | None = None          # set by the launcher before the app starts
    status_path: Path | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # by dpid, for the switch's current connection only (Fabric.current)
        self._reads: dict[int, dict] = {}     # {"flows": [...], "groups": [...], "pending"}
        self._ports: dict[int, list] = {}

    # -- events --------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        why = self.fabric.check_certificate(dp.id, self._certificate_dpids(dp))
        if why is not None:
            self._refuse(dp, why)
            return
        st = self.fabric.connected(dp.id, dp)
        if st is None:
            why = (f"refused datapath {dp.id:016x}: not a switch of {self.fabric.topo.name()} "
                   f"(expected dpid 1..{self.fabric.topo.n_switches})")
            self._refuse(dp, why)
            return
        self._ports[dp.id] = []
        self.logger.info("switch %d (dpid %016x) connected; checking its ports", st.switch,
                         dp.id)
        dp.send_msg(dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0))

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _port_desc(self, ev):
        dp = ev.msg.datapath
        st = self.fabric.current(dp.id, dp)
        if st is None or dp.id not in self._ports:
            return
        self._ports[dp.id] += [p.port_no for p in ev.msg.body]
        if ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            return
        ports = self._ports.pop(dp.id)
        why = self.fabric.check_ports(st.switch, ports)
        if why is not None:
            self.fabric.refuse(dp.id)
            self._refuse(dp, f"refused datapath {dp.id:016x}: {why}")
            return
        self.logger.info("switch %d ports match; reading its tables", st.switch)
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
        if self.fabric.current(dp.id, dp) is not None:
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
        if dp.id is None or self.fabric.switch_of(dp.id) is None:
            return
        st = self.fabric.disconnected(dp.id, dp)
        if st is None:
            self.logger.info("switch %d (dpid %016x): a replaced connection closed; the "
                             "current one stays", self.fabric.switch_of(dp.id), dp.id)
            return
        self.logger.warning("switch %d (dpid %016x) disconnected", st.switch, dp.id)
        self._reads.pop(dp.id, None)
        self._ports.pop(dp.id, None)
        self._write_status()

    def _certificate_dpids(self, dp):
        """The datapath ids the peer's TLS certificate carries; ``None`` over plain TCP."""
        getpeercert = getattr(dp.socket, "getpeercert", None)
        return None if getpeercert is None else dpid_ranges(getpeercert())

    # -- read / compare / repair ---------------------------------------------------------------
    def _read(self, dp):
        p, o = dp.ofproto_parser, dp.ofproto
        self._reads[dp.id] = {"flows": [], "groups": [], "pending": {"flows", "groups"}}
        dp.send_msg(p.OFPFlowStatsRequest(dp, 0, o.OFPTT_ALL, o.OFPP_ANY, o.OFPG_ANY, 0, 0,
                                          p.OFPMatch()))
        dp.send_msg(p.OFPGroupDescStatsRequest(dp, 0))

    def _collect(self, m, kind: str):
        r = self._reads.get(m.datapath.id)
        if r is None or self.fabric.current(m.datapath.id, m.datapath) is None:
            return
        r[kind] += m.body
        if not m.flags & m.datapath.ofproto.OFPMPF_REPLY_MORE:
            r["pending"].discard(kind)
        if not r["pending"]:
            del self._reads[m.datapath.id]
            self._judge(m.datapath, r["flows"], r["groups"])

    def _judge(self, dp, flows, groups):
        fab = self.fabric
        st = fab.switches[dp.id]
        diff = fab.compare(st.switch, flows, groups)
        verdict = fab.verdict(dp.id, diff)
        if verdict == "verified":
            self.logger.info("switch %d verified: %d flows, %d groups; sent %d flow-mods, "
                             "%d group-mods", st.switch, len(st.program.flows),
                             len(st.program.groups), st.flow_mods, st.group_mods)
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

    def _write_status(self):
        if self.status_path is None:
            return
        tmp = self.status_path.with_name(self.status_path.name + f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(self.fabric.status()))
        os.replace(tmp, self.status_path)
