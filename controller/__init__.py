"""What installs table sets into real fabrics: the os-ken OpenFlow 1.3 controller
(:mod:`controller.openflow`, ``fabroute controller DIR``; docs/openflow.md) and the OpenSM
routing-engine plugin (:mod:`controller.opensm`; docs/infiniband.md)."""
