"""fabroute's front door: the ``fabroute`` command (:mod:`fabroute.cli`), which assembles each
package's own sub-commands, and the demo (:mod:`fabroute.demo`), which runs them all.  Nothing
below this package imports it (``docs/architecture.md``)."""
