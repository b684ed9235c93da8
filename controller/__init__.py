"""fabroute controller (built in a later issue)."""
