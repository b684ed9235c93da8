"""The ``fabroute`` command: each package adds its own sub-commands (``add_parsers``), this
module assembles them and maps every error to its exit code in one place
(:mod:`tablegen.errors`: 0 success, 1 failed verification or a failed run, 2 bad input)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from tablegen.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, FabrouteError
from tablegen.numba_cache import use_writable_cache


def _interrupted_at_start(_signum, _frame):
    # Ctrl-C while the modules below load: nothing has been started or written yet
    print("fabroute: interrupted", file=sys.stderr)
    os._exit(EXIT_INTERRUPTED)


_main_thread = threading.current_thread() is threading.main_thread()
_sigint = signal.signal(signal.SIGINT, _interrupted_at_start) if _main_thread else None
try:
    # First: the imports below load Numba, which reads NUMBA_CACHE_DIR once; a user who
    # cannot write the installed sources needs it set (docs: README, "Supported sizes and
    # users").
    use_writable_cache()
    from controller import cli as controller_cli
    from emulation import cli as emulation_cli
    from fabroute import demo
    from simulator import cli as simulator_cli
    from tablegen import cli as tablegen_cli
    from tablegen import ib_cli as tablegen_ib_cli
finally:
    if _sigint is not None:
        signal.signal(signal.SIGINT, _sigint)


class _Parser(argparse.ArgumentParser):
    """argparse with fabroute's bad-input convention; sub-parsers are made of this class."""

    def error(self, message):  # one line, exit 2, as every other bad input
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)

    def _get_values(self, action, arg_strings):
        # an empty value (--out '', a SPEC of blanks) is a slip, never a choice, except
        # where an option documents '' (``empty_ok``: ib compare --engines '' for none)
        strings = arg_strings if isinstance(arg_strings, list) else [arg_strings]
        if (action.nargs not in (0, argparse.PARSER, argparse.REMAINDER)
                and not getattr(action, "empty_ok", False)
                and any(isinstance(s, str) and not s.strip() for s in strings)):
            name = "/".join(action.option_strings) or action.metavar or action.dest
            self.error(f"argument {name}: the value is empty; expected a value")
        return super()._get_values(action, arg_strings)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fabroute", description="Routing tables, virtual channels and deadlock "
                "proofs for Slim Fly, Dragonfly and DSN-F fabrics.")
    sub = p.add_subparsers(dest="command", required=True)
    tablegen_cli.add_parsers(sub)       # topology tables verify path analyze expand compare
    simulator_cli.add_throughput_bound(sub.choices["analyze"])
    demo.add_parser(sub)
    controller_cli.add_parsers(sub)     # controller
    emulation_cli.add_parsers(sub)      # emulate
    ib = sub.add_parser("ib", help="InfiniBand: export LMC layers, SLs and SL2VL; load them into "
                        "OpenSM on ibsim and compare")
    ib_sub = ib.add_subparsers(dest="ib_command", required=True)
    tablegen_ib_cli.add_ib_parsers(ib_sub)  # ib export import
    emulation_cli.add_ib_parsers(ib_sub)    # ib apply update compare
    simulator_cli.add_parsers(sub)      # simulate sweep
    return p


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM unwinds like Ctrl-C, so that half-built output directories are removed and
    # forked workers stopped (a command that serves, like the controller, sets its own)
    old = (signal.signal(signal.SIGTERM, _interrupt)
           if threading.current_thread() is threading.main_thread() else None)
    try:
        args = parser().parse_args(argv)
        return args.func(args)
    except (FabrouteError, KeyError) as e:
        msg = e.args[0] if e.args else str(e)
        print(f"fabroute: {msg}", file=sys.stderr)
        return getattr(e, "exit_code", EXIT_BAD_INPUT)
    except OSError as e:
        # the system refused a path or resource the user named (every expected case is
        # checked first and named in its own words; this is the net under the rest)
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"fabroute: {where}{e.strerror or e}; expected a path or resource this user "
              "may use", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("fabroute: interrupted; no output was half-written", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def entry() -> None:
    """The ``fabroute`` program: :func:`main`, then an exit that a late Ctrl-C cannot turn
    into death by signal (the command's work and output are complete by then)."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    entry()
