"""Run real OpenSM with fabroute's routing engine on an ibsim fabric, read LFTs, SL2VL and
PathRecord SLs back and compare them with the exported files."""
