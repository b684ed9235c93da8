"""fabroute emulation: Open vSwitch (userspace datapath) + Mininet hosts + scapy probes
(docs/emulation.md)."""
