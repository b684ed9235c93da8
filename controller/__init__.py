"""fabroute controller: an os-ken (OpenFlow 1.3) application that installs a table set into
switches and verifies it by reading it back (``fabroute controller DIR``; docs/openflow.md)."""
