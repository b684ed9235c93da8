"""The errors every fabroute package raises, and the exit code each stands for.

The command line maps them in one place (:func:`fabroute.cli.main`): the message, which is
one line naming the bad value and what was expected, goes to stderr and the process exits with
the error's ``exit_code``.

=========  ==================================================================================
exit code  meaning
=========  ==================================================================================
0          success
1          the tables failed verification, or a run against a real peer (OpenSM on ibsim,
           Open vSwitch under Mininet) failed or found a mismatch
2          bad input: a value given on the command line or a file, a missing tool, or tables
           a format cannot express (nothing is written or started)
130        interrupted (Ctrl-C, SIGTERM): output directories are left as they were
=========  ==================================================================================
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class FabrouteError(Exception):
    """Base of fabroute's errors; ``exit_code`` is what the command line exits with."""

    exit_code = EXIT_BAD_INPUT


class BadInput(FabrouteError, ValueError):
    """A value the user gave (argument, file, directory) or a missing tool; the message names
    the value and what was expected."""


class TopologyError(BadInput):
    """Bad topology parameters, or a routing the topology does not have."""


class NotExpressible(FabrouteError, ValueError):
    """A verified table set that a format or a runtime cannot express: more VCs than
    OpenFlow's PCP plan, more SLs than InfiniBand's data VLs, LIDs beyond the unicast range.
    Bad input where the user asked for that format; ``fabroute tables`` skips the format."""


class RunFailed(FabrouteError, RuntimeError):
    """A run against a real peer (ibsim + OpenSM, Mininet + Open vSwitch) failed; ``report``
    holds what is known of it (log tails, counts)."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report if report is not None else {}
