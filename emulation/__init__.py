"""What stands in for real fabrics: Mininet + Open vSwitch with scapy probes
(:mod:`emulation.mininet`, docs/emulation.md) and OpenSM on ibsim (:mod:`emulation.ibsim`,
docs/infiniband.md)."""
