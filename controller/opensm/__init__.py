"""The OpenSM routing-engine plugin: ``fabroute_osm.c``, the C source a real subnet manager
dlopen()s as routing engine ``fabroute`` (it loads a table set's LFTs, SL2VL and path SLs;
docs/infiniband.md).  :func:`emulation.ibsim.apply.build_tools` compiles it."""

from pathlib import Path

SOURCE = Path(__file__).with_name("fabroute_osm.c")
