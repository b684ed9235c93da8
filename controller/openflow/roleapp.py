"""The os-ken side of controller roles (``--role master|standby --peer HOST:PORT``): a mixin
of :class:`controller.openflow.app.FabrouteApp` that sends the role requests
:class:`controller.openflow.roles.Roles` decides, runs the heartbeat, keeps a standby's view
of the switches current, and takes over.

A standby reads and never writes: it asks ``SLAVE``, reads every switch's flows and groups
when it connects and every :data:`VIEW_S` seconds after, compares them with the program
(``verified`` or ``differs`` in its status; nothing is repaired), follows port status into
its failed cables, and follows the master's program (the heartbeat names its cookie,
version and failed cables: the standby computes the same tables and compares against them).
On takeover it claims ``MASTER`` with a newer generation on every switch, reads every switch
again — the ordinary read → compare → repair cycle, so a switch that holds its program is
verified without a flow-mod —, and once every switch is verified routes around cables that
failed while no controller could write.
"""

from __future__ import annotations

import time

import numpy as np
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto.ofproto_v1_3 import (
    OFPCR_ROLE_NOCHANGE,
    OFPET_ROLE_REQUEST_FAILED,
    OFPRRFC_STALE,
)

from controller.openflow.fabric import Fabric, SwitchState, generation_cookie
from controller.openflow.roles import heartbeat_server, watch_peer

VIEW_S = 5.0             # a standby reads every switch again this often
TAKEOVER_VERIFY_S = 30   # a takeover waits at most this long for every switch verified


class RoleMixin:
    roles = None          # controller.openflow.roles.Roles, set by the launcher
    peer = None           # master: the heartbeat's listening socket; standby: (host, port)
    serve_peer = None     # standby: the listening socket of its heartbeat once it is master
    _adopting: frozenset | set = frozenset()    # a new master's switches not read yet

    def _start_roles(self) -> None:
        if self.roles is None:
            return
        if self.roles.state == "master":
            hub.spawn(heartbeat_server, self.peer, self._beat, hub.spawn, hub.sleep,
                      alive=self.roles.may_write)
        else:
            hub.spawn(watch_peer, self.peer, self.roles, self._take_over, hub.sleep,
                      self._follow)
            hub.spawn(self._view_loop)

    def _writes(self) -> bool:
        """Whether this controller may write to the switches (no roles: always)."""
        return self.roles is None or self.roles.may_write()

    def _adopts(self, dpid: int) -> bool:
        """Whether a read's UGAL-L decision entries become the program
        (:meth:`~controller.openflow.fabric.Fabric.adopt`): every read of a standby, which so
        follows the master's decisions, and a new master's first read of each switch, which
        so keeps them instead of rewriting them."""
        if self.roles is None:
            return False
        if not self._writes():
            return True
        if dpid not in self._adopting:
            return False
        self._adopting.discard(dpid)
        return True

    def _beat(self) -> bytes:
        from tablegen.topologies.failures import failed_pairs

        fab = self.fabric
        return self.roles.beat_line({"cookie": f"{fab.cookie:016x}", "version": fab.version,
                                     "failed": sorted(map(list, failed_pairs(fab.topo.params)))})

    def _ask_role(self, dp, role: int | None = None, generation: int = 0) -> None:
        if role is None:
            role, generation = self.roles.request()
        dp.send_msg(dp.ofproto_parser.OFPRoleRequest(dp, role, generation))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _role_features(self, ev):
        if self.roles is not None:
            self._ask_role(ev.msg.datapath)

    @set_ev_cls(ofp_event.EventOFPRoleReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _role_reply(self, ev):
        m = ev.msg
        nxt = self.roles.replied(m.datapath.id, m.role, m.generation_id)
        if nxt is not None:
            self._ask_role(m.datapath, *nxt)
        t = self.roles.takeover
        if t is not None and "t_master" not in t and all(
                self.roles.switches.get(d, ("",))[0] == "master" for d in self.fabric.switches):
            t["t_master"] = time.time()         # every switch holds us as its master
        self._write_status()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _role_error(self, ev):
        m = ev.msg
        if self.roles is None or m.type != OFPET_ROLE_REQUEST_FAILED or m.code != OFPRRFC_STALE:
            return
        if self.roles.refused_stale(m.datapath.id):
            self.logger.error("deposed: a switch refused generation %d as stale (a newer "
                              "master claimed the switches); reading only from now on",
                              self.roles.generation)
            for st in list(self.fabric.switches.values()):
                self._ask_role(st.conn, OFPCR_ROLE_NOCHANGE)
        else:                    # a standby behind the times: learn the switch's generation
            self._ask_role(m.datapath, OFPCR_ROLE_NOCHANGE)
        self._write_status()

    def _viewed(self, st, diff) -> None:
        """A standby's read of a switch: what it holds against its program, nothing sent."""
        st.last_diff = diff.summary()
        st.state = "verified" if diff.empty else "differs"
        self._write_status()

    def _view_loop(self) -> None:
        while self.roles.state != "master":
            hub.sleep(VIEW_S)
            for d, st in list(self.fabric.switches.items()):
                if st.state in ("verified", "differs") and d not in self._reads:
                    self._read(st.conn)

    def _follow(self, beat: dict) -> None:
        """The master's heartbeat names another program than the standby's (a live update,
        a cable routed around): compute the same tables and compare the switches with them."""
        fab = self.fabric
        if beat.get("cookie") == f"{fab.cookie:016x}" and beat.get("version") == fab.version:
            return
        try:
            failed = {tuple(p) for p in beat["failed"]}
            self._mark_failed(failed)
            ts = self._links.base
            if failed != set(self._links.known):
                from tablegen.topologies.failures import without_links
                from tablegen.verify import same_routing

                ts, rep = same_routing(without_links(self._links.intact, sorted(failed)), ts)
                if not rep.ok:
                    raise ValueError(rep.errors[0])
            if f"{generation_cookie(ts):016x}" != beat["cookie"]:
                raise ValueError("the tables of its failed cables have another cookie")
            new = Fabric(ts, fab.split_bits, version=int(beat["version"]),
                         fast_failover=fab.fast_failover, profile=fab.profile)
            if fab.adapted is not None and new.plan_.decide is not None:
                new.adapt(*fab.adapted)             # as the master's update does
                new.decisions.inherit(fab.decisions)
        except (ValueError, KeyError, TypeError) as e:
            self.logger.warning("standby: cannot follow the master's program %s: %s",
                                beat.get("cookie"), e)
            return
        self.logger.info("standby: the master serves %s (version %d); following",
                         ts.topo.name(), new.version)
        for d, st in fab.switches.items():
            new.switches[d] = SwitchState(st.switch, new.program(st.switch), state="reading",
                                          conn=st.conn)
        self.fabric = new
        for st in list(new.switches.values()):
            self._read(st.conn)

    def _mark_failed(self, failed: set) -> None:
        """Cables the master routes around are failed in the standby's own view too (it may
        have started after their ports went down); only a port coming up clears them."""
        t = self._links.intact
        for a, b in failed - set(self._links.known):
            for u, v in ((a, b), (b, a)):
                self._links.down.update((u, int(j)) for j in np.flatnonzero(t.adj[u] == v))

    def _take_over(self) -> None:
        """The master is gone: claim every switch with a newer generation, read each again
        (repairing only what differs), then route around cables that failed meanwhile."""
        g = self.roles.take_over()
        self.logger.warning("the master is gone (%s); taking over with generation %d",
                            self.roles.takeover["by"], g)
        self._adopting = set(self.fabric.switches)
        for st in list(self.fabric.switches.values()):
            st.state, st.repairs = "reading", 0
            self._ask_role(st.conn)
            self._read(st.conn)
        self._write_status()
        if self.serve_peer is not None:         # a new standby may stand by this master
            hub.spawn(heartbeat_server, self.serve_peer, self._beat, hub.spawn, hub.sleep,
                      alive=self.roles.may_write)
        hub.spawn(self._after_takeover, time.monotonic())

    def _after_takeover(self, t0: float) -> None:
        deadline = t0 + TAKEOVER_VERIFY_S
        while time.monotonic() < deadline and any(
                st.state in ("reading", "repairing") for st in self.fabric.switches.values()):
            hub.sleep(0.02)
        sw = list(self.fabric.switches.values())
        self.roles.takeover.update(
            t_verified=time.time(), verified=sum(st.state == "verified" for st in sw),
            switches=len(sw), flow_mods=sum(st.flow_mods for st in sw),
            group_mods=sum(st.group_mods for st in sw),
            repaired=sum(st.repairs > 0 for st in sw))
        self.logger.warning("takeover: %s", self.roles.takeover)
        target = self._links.target()
        if target is not self.fabric.ts and generation_cookie(target) != self.fabric.cookie:
            self._updates.put(("links", "cables failed while no controller could write",
                               time.time(), None))
        self._write_status()
