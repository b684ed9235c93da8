"""Open vSwitch (userspace datapath) + Mininet hosts + scapy probes: build the net, run the
controller, probe every pair, prove paths and VCs from per-flow counters."""
