"""InfiniBand: LMC path layers, SLs and VLs proven under IB semantics, and the files OpenSM and
ibsim load (LFTs, SL2VL, path SLs, GUID/LID plan), written and read back.  No module here starts
a process: running OpenSM on ibsim is :mod:`emulation.ibsim`."""
