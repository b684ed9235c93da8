"""fabroute simulator (built in a later issue)."""
