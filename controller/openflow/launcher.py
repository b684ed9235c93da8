"""``fabroute controller DIR``: run the os-ken application on a table directory.

os-ken 4.x ships no ``osken-manager``; this is ours.  Facts of os-ken 4.2 it works around:
``os_ken.base.app_manager`` must be imported before ``os_ken.controller.controller``
(circular import otherwise); with the default native hub a switch disconnect never reaches
``DEAD_DISPATCHER``, so the eventlet hub is selected before os-ken is imported; the hub's
threads cannot be joined on SIGTERM, so the handler exits the process.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from tablegen.errors import BadInput, NotExpressible


def fabric_of(table_set):
    """The controller's :class:`~controller.openflow.fabric.Fabric` of ``table_set``; tables the
    pipeline cannot express (more than 8 VCs, VIDs or MACs out of plan) are bad input:
    :class:`~tablegen.errors.BadInput` with OpenFlow's one-line reason."""

    from controller.openflow.fabric import Fabric

    try:
        return Fabric(table_set)
    except NotExpressible as e:
        raise BadInput(f"controller: {e}") from None


def run(table_set, listen: str = "127.0.0.1:6653", status: Path | None = None,
        log_file: Path | None = None) -> None:
    """Serve ``table_set`` to every switch that connects to ``listen`` (``host:port``) until
    SIGTERM/SIGINT.  Never returns.  Refuses (:func:`fabric_of`) before listening."""
    fabric = fabric_of(table_set)
    os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")
    host, _, port = listen.rpartition(":")
    from os_ken import cfg
    from os_ken.base import app_manager  # before os_ken.controller (circular import)
    from os_ken.controller import controller  # noqa: F401  registers the ofp-listen options

    from controller.openflow.app import FabrouteApp

    logging.basicConfig(level=logging.INFO, filename=log_file,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg.CONF(args=[], project="os_ken")
    cfg.CONF.set_override("ofp_listen_host", host)
    cfg.CONF.set_override("ofp_tcp_listen_port", int(port))
    FabrouteApp.fabric = fabric
    FabrouteApp.status_path = status

    def stop(signum, _frame):
        logging.getLogger("fabroute").info("signal %d: exiting", signum)
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logging.getLogger("fabroute").info("serving %s %s on %s (cookie 0x%016x)",
                                       table_set.routing, table_set.topo.name(), listen,
                                       fabric.cookie)
    app_manager.AppManager.run_apps(["controller.openflow.app"])
    sys.exit(0)
