"""fabroute emulation (built in a later issue)."""
