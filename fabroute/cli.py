"""The ``fabroute`` command: each package adds its own sub-commands (``add_parsers``), this
module assembles them and maps every error to its exit code in one place
(:mod:`tablegen.errors`: 0 success, 1 failed verification or a failed run, 2 bad input).

A reader that closes stdout early (``fabroute … | head``) ends the command quietly with exit
0: what was asked for was printed as far as the reader wanted it (:func:`main`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from tablegen.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, BadInput, FabrouteError
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
    from fabroute import demo, shell
    from simulator import cli as simulator_cli
    from tablegen import cli as tablegen_cli
    from tablegen import design_cli as tablegen_design_cli
    from tablegen import draw_cli as tablegen_draw_cli
    from tablegen import fabric_cli as tablegen_fabric_cli
    from tablegen import ib_cli as tablegen_ib_cli
finally:
    if _sigint is not None:
        signal.signal(signal.SIGINT, _sigint)


class _Parser(argparse.ArgumentParser):
    """Every fabroute parser (sub-commands are made of the same class): defaults shown in
    ``--help``, a usage error or an empty value is one line and exit 2."""

    def __init__(self, *a, **k):
        k.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*a, **k)
        self.register("action", "parsers", _SubParsers)

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


class _HelpFormatter(argparse.HelpFormatter):
    """``--help`` with each option's default: ``(default: X)`` appended where the help text
    does not already name it (argparse's ArgumentDefaultsHelpFormatter, without its
    ``default: None`` and ``default: False`` noise)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or "%(default)" in text or action.default in (None, False, [])
                or action.default is argparse.SUPPRESS or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


class _SubParsers(argparse._SubParsersAction):
    """A sub-command's one-line ``help`` (the list in ``fabroute --help``) is also the
    description its own ``--help`` starts with."""

    def add_parser(self, name, **k):
        if "help" in k:
            k.setdefault("description", k["help"])
        return super().add_parser(name, **k)


def version() -> str:
    """fabroute's version, from the installed package's metadata."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("fabroute")
    except PackageNotFoundError:     # run from a source tree that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: the metadata is read only when asked for (start-up time)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print fabroute's version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"fabroute {version()}")
        parser.exit()


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fabroute", description="Routing tables, virtual channels and deadlock "
                "proofs for Slim Fly, Dragonfly and DSN-F fabrics.",
                epilog="Each command's options: fabroute COMMAND --help; the first hour: "
                "docs/quickstart.md; `man fabroute` once installed (make install).")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tablegen_cli.add_parsers(sub)       # topology tables verify path analyze expand compare
    tablegen_fabric_cli.add_parsers(sub)    # reconcile
    tablegen_draw_cli.add_parsers(sub)      # draw
    tablegen_design_cli.add_parsers(sub)    # cost design
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
    _add_completion(sub)
    return p


def _add_completion(sub) -> None:
    sp = sub.add_parser("completion", help="shell completion script (bash, zsh) on stdout; "
                        "with --install, the scripts and the man page under a prefix")
    sp.add_argument("shell", nargs="?", choices=shell.SHELLS, help="the shell to print the "
                    "script for (bash: `source <(fabroute completion bash)`)")
    sp.add_argument("--install", metavar="PREFIX", help="write "
                    + ", ".join(f"PREFIX/{f}" for f in shell.FILES.values())
                    + " (make install: the venv; `man fabroute` then works with it activated)")
    sp.set_defaults(func=_cmd_completion)


def _cmd_completion(args) -> int:
    if (args.shell is None) == (args.install is None):
        raise BadInput("completion: give a SHELL or --install PREFIX; expected one of them")
    if args.install is not None:
        from tablegen.exports.outdir import check_writable

        prefix = check_writable(args.install, "--install")
        for kind, path in shell.install(parser(), version(), prefix).items():
            print(f"{kind}: {path}")
    else:
        sys.stdout.write(shell.completion(parser(), args.shell))
    return 0


_resend: threading.Timer | None = None     # a signal put off by _interrupt, sent again soon
_signalled = False      # _interrupt raised: the command is unwinding from a Ctrl-C / SIGTERM


def _interrupt(signum, frame):
    # Raised inside a ctypes callback (llvmlite's object cache, while Numba compiles or loads
    # its cache) a KeyboardInterrupt is printed and dropped ("Exception ignored ..."), not
    # unwound: send the signal again a moment later, back in plain Python code.
    global _resend, _signalled
    if _in_llvm_callback(frame):
        if _resend is None or not _resend.is_alive():
            _resend = threading.Timer(0.05, os.kill, (os.getpid(), signum))
            _resend.start()
        return
    _signalled = True
    raise KeyboardInterrupt(f"signal {signum}")


def _in_llvm_callback(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name.startswith("_raw_object_cache"):
            return True
        frame = frame.f_back
    return False


def _quiet_broken_pipe() -> int:
    """stdout's reader has gone (``| head``): point stdout at /dev/null, so that the flush at
    exit does not raise again, and end with 0 — the reader took what it wanted."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()      # here, not at exit, where a closed pipe could not be caught
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _main(argv: list[str] | None) -> int:
    global _signalled
    _signalled = False
    # SIGTERM unwinds like Ctrl-C, so that half-built output directories are removed and
    # forked workers stopped (a command that serves, like the controller, sets its own)
    old = ({sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
           if threading.current_thread() is threading.main_thread() else None)
    try:
        args = parser().parse_args(argv)
        return args.func(args)
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as e:
        # after a Ctrl-C, whatever C code it cut short may raise anything instead
        # (matplotlib: "ImportError: initialization failed", a pybind11 TypeError)
        return _interrupted() if _signalled else _failed(e)
    finally:
        if _resend is not None:     # the command ended first: nothing left to interrupt
            _resend.cancel()
        if old is not None:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def _failed(e: Exception) -> int:
    """The exit code of an error (:mod:`tablegen.errors`), its one line printed; anything
    else is a bug and raised again."""
    if isinstance(e, BrokenPipeError):      # before OSError: not a bad path
        return _quiet_broken_pipe()
    if isinstance(e, (FabrouteError, KeyError)):
        print(f"fabroute: {e.args[0] if e.args else e}", file=sys.stderr)
        return getattr(e, "exit_code", EXIT_BAD_INPUT)
    if isinstance(e, OSError):
        # the system refused a path or resource the user named (every expected case is
        # checked first and named in its own words; this is the net under the rest)
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"fabroute: {where}{e.strerror or e}; expected a path or resource this user "
              "may use", file=sys.stderr)
        return EXIT_BAD_INPUT
    raise e


def _interrupted() -> int:
    print("fabroute: interrupted; no output was half-written", file=sys.stderr)
    return EXIT_INTERRUPTED


def entry() -> None:
    """The ``fabroute`` program: :func:`main`, then an exit that a late Ctrl-C cannot turn
    into death by signal (the command's work and output are complete by then)."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == EXIT_INTERRUPTED:
        # an interrupted command has unwound its outputs; skip the interpreter's finalizers,
        # which abort on a C extension whose initialisation the Ctrl-C cut short
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
