"""The os-ken side of learning real cabling (``controller --discover``): a mixin of
:class:`controller.openflow.app.FabrouteApp` that lists each waiting datapath's ports, sends LLDP
out of every up port, feeds the answers (and host frames) to
:class:`controller.openflow.learn.Learner`, and, once the cabling settles, maps it onto the plan
and serves the mapped switches their programs — degraded where cables are missing.  The decisions
live in the learner; this shell only moves messages.
"""

from __future__ import annotations

import time

from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub

from controller.openflow.learn import LLDP_INTERVAL_S, LLDP_MAPPED_S
from controller.openflow.lldp import ETH_LLDP


class LldpMixin:
    def _lldp_ports(self, m) -> bool:
        """A port list of a datapath waiting for the map (True: handled here): its ports to
        the cabling, the discovery entries, LLDP out of every port."""
        dp = m.datapath
        if dp.id not in self._discovering or self._dps.get(dp.id) is not dp:
            return False
        r = self._ports.setdefault(("discover", dp.id), [])
        r += m.body
        if m.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            return True
        ports = self._ports.pop(("discover", dp.id))
        self._port_list(dp, ports)
        for x in self.learner.discovery(self.fabric.cookie):
            x.datapath = dp
            dp.send_msg(x)
        self._probe(dp)
        self._write_status()
        return True

    def _port_list(self, dp, ports) -> None:
        o = dp.ofproto
        self.learner.cabling.switch(dp.id, [
            (p.port_no, not (p.state & o.OFPPS_LINK_DOWN or p.config & o.OFPPC_PORT_DOWN),
             p.hw_addr) for p in ports])

    def _probe(self, dp, only: int | None = None) -> None:
        """LLDP out of every up port of ``dp`` (or port ``only``)."""
        p, o = dp.ofproto_parser, dp.ofproto
        for port, data in self.learner.probes(dp.id, only):
            dp.send_msg(p.OFPPacketOut(dp, o.OFP_NO_BUFFER, o.OFPP_CONTROLLER,
                                       [p.OFPActionOutput(port, 0)], data))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        m = ev.msg
        dp = m.datapath
        if self.learner is None or self._dps.get(dp.id) is not dp:
            return
        in_port = m.match.get("in_port")
        data = bytes(m.data)
        if len(data) < 14 or in_port is None:
            return
        if int.from_bytes(data[12:14], "big") != ETH_LLDP:
            if self.learner.cabling.host_in(dp.id, in_port, ":".join(
                    f"{b:02x}" for b in data[6:12])):
                self._write_status()
            return
        cable = self.learner.cabling.lldp_in(dp.id, in_port, data)
        if cable is None:
            return
        self.logger.info("LLDP: cable %016x port %d - %016x port %d", cable[0][0],
                         cable[0][1], cable[1][0], cable[1][1])
        if self.learner.assignment is None or self.learner.assignment.known(*cable):
            return
        fits = self.learner.appeared(cable, self._links)
        if fits is None:
            self.logger.warning("LLDP: the cable %016x port %d - %016x port %d fits no "
                                "missing cable of the plan; left unused", cable[0][0],
                                cable[0][1], cable[1][0], cable[1][1])
            return
        self.logger.warning("LLDP: planned cable %s plugged in; restoring its tables", fits)
        self._updates.put(("links", f"cable {fits[0]}-{fits[2]} plugged in", time.time(),
                           None))

    def _lldp_loop(self):
        last = 0.0
        while True:
            hub.sleep(LLDP_INTERVAL_S)
            try:
                period = LLDP_INTERVAL_S if self.learner.assignment is None else LLDP_MAPPED_S
                if time.monotonic() - last >= period:
                    last = time.monotonic()
                    for dp in list(self._dps.values()):
                        self._probe(dp)
                if self.learner.ready():
                    self._map()
            except Exception:        # never the end of LLDP; logged (rate-limited)
                self.logger.exception("LLDP round failed")

    def _mapped_fabric(self):
        """The fabric of the map: the mapped datapaths, the tables without the planned cables
        the cabling lacks, the adaptive UGAL-L settings of the fabric it replaces."""
        old = self.fabric
        self.learner.failed(self._links)
        new = self.learner.fabric(self._links.target(), fast_failover=old.fast_failover)
        if old.adapted is not None and new.plan_.decide is not None:
            new.adapt(*old.adapted)
        return new

    def _map(self):
        """The cabling has settled: map it, serve the mapped datapaths their programs
        (degraded where cables are missing), refuse the others in one line each."""
        a = self.learner.learn()
        if a is None:
            self.logger.error("the learned cabling does not fit %s: %s; nothing installed",
                              self.fabric.topo.name(), self.learner.error)
            self._write_status()
            return
        act = a.match.to_dict()
        self.logger.warning("cabling learned: %d switches, map by %s; missing %d, moved %d, "
                            "extra %d cables; failed links %s", len(a.switch), a.by,
                            len(act["missing"]), len(act["moved"]), len(act["extra"]),
                            a.failed_pairs() or "none")
        self.fabric = self._mapped_fabric()
        for d in sorted(self._discovering):
            dp = self._dps[d]
            st = self.fabric.connected(d, dp)
            why = None if st is None else self.fabric.check_ports(
                st.switch, sorted(self.learner.cabling.ports.get(d, {})))
            if st is None or why is not None:
                for x in self.learner.undiscovery():        # nothing stays installed
                    x.datapath = dp
                    dp.send_msg(x)
                if st is not None:
                    self.fabric.refuse(d)
                self._refuse(dp, f"refused datapath {d:016x}: " + (
                    why or "the map of the cabling leaves it no planned switch"))
                continue
            self._read(dp)
        self._discovering.clear()
        self._write_status()
