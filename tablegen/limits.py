"""The largest inputs fabroute supports, in one table.  Every topology SPEC key and every numeric
command-line option is checked against them before anything is allocated, so a mistyped or
hostile value is one line and exit code 2 (:class:`~tablegen.errors.BadInput`), never a
traceback or a machine-sized allocation.

====================== ========= ============================================================
constant               value     why
====================== ========= ============================================================
MAX_SWITCHES           16,384    the 16K-switch class: building any kind at this size takes
                                 under 2 s; ``topology``/``analyze`` (all-pairs distances)
                                 6-30 s and 1.2-1.4 GiB; ``tables`` of DSN-F n = 16,384 52 s
                                 and 6.5 GiB (the benchmarked sizes, ``benchmarks/RESULTS.md``,
                                 are Slim Fly q = 19, Dragonfly 2,064, DSN-F 4,096 switches)
MAX_HOSTS              131,072   every Slim Fly that can be routed keeps its default
                                 concentration (q = 41: 3,362 × 31 = 104,222 hosts); the
                                 16,384-switch fabrics take up to 8 hosts a switch
MAX_HOSTS_PER_SWITCH   64        host ports per switch (a 64-port switch's worth)
MAX_RADIX              64        network ports per switch: a switch's usable ports are a
                                 64-bit mask in the routing (``routing.build.mask_dtype``)
SLIMFLY_MAX_Q          41        the largest admissible q whose network radix (3q - δ)/2 = 61
                                 fits MAX_RADIX (q = 43 needs 65 ports)
DLN_MAX_DEGREE         12        DLN draws random matchings by rejection, e^(x/2) tries per
                                 round: x = 12 at n = 16,384 builds in 1.8 s, x = 16 in 14 s
MAX_DIAMETER           254       hop distances are ``uint8`` (255 means unreachable)
MAX_VCS                64        VCs a table set may use (the VC field of the tables; OpenFlow
                                 carries 8, InfiniBand 15 data VLs)
MAX_JOBS               64        worker processes of ``tables --jobs`` and ``sweep --workers``;
                                 more than the routings × formats of one run never help
SEED_BOUND             2**32     seeds are ``0 <= seed < 2**32`` (NumPy's and the simulator's
                                 generators take 32-bit seeds everywhere)
MAX_LMC                7         InfiniBand's LID mask control is 3 bits (``ib export --lmc``,
                                 ``verify --lmc``)
MAX_POINTS             1,000     topologies one ``compare`` analyses (sizes × 4 families +
                                 expansion points), load points of one ``sweep`` (routings ×
                                 loads): each is seconds to minutes of work
====================== ========= ============================================================

The checks here are O(1): each builder computes the sizes of its construction from its keys in
closed form and calls :func:`at_most`, :func:`check_switches` and :func:`check_hosts` before it
allocates anything.
"""

from __future__ import annotations

import argparse
import math
import numbers
import re

from tablegen.errors import BadInput, TopologyError

MAX_SWITCHES = 16_384
MAX_HOSTS = 131_072
MAX_HOSTS_PER_SWITCH = 64
MAX_RADIX = 64
SLIMFLY_MAX_Q = 41
DLN_MAX_DEGREE = 12
MAX_DIAMETER = 254
MAX_VCS = 64
MAX_JOBS = 64
SEED_BOUND = 2**32
MAX_LMC = 7
MAX_POINTS = 1_000


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def at_most(kind: str, name: str, value, hi: int, expected: str, error=TopologyError) -> int:
    """``value`` as an ``int`` if it is an integer ``<= hi``; else ``error`` (one line,
    naming ``kind: name=value`` and ``expected``).  Lower bounds stay with the builders."""
    prefix = f"{kind}: " if kind else ""
    if not _is_int(value):
        raise error(f"{prefix}{name}={value!r:.40} is not an integer; expected {expected}")
    if value > hi:
        raise error(f"{prefix}{name}={value} is above the largest supported {name}={hi}; "
                    f"expected {expected}")
    return int(value)


def check_switches(kind: str, given: str, switches: int, expected: str) -> None:
    """Refuse ``switches > MAX_SWITCHES``; ``given`` names the keys that gave that count."""
    if switches > MAX_SWITCHES:
        raise TopologyError(f"{kind}: {given} gives {switches:,} switches, above the largest "
                            f"supported {MAX_SWITCHES:,}; expected {expected}")


def check_hosts(kind: str, key: str, per_switch, switches: int) -> int:
    """``per_switch`` (the SPEC key ``key``) as an ``int`` if it is at most
    :data:`MAX_HOSTS_PER_SWITCH` and ``switches * per_switch <= MAX_HOSTS``."""
    per_switch = at_most(kind, key, per_switch, MAX_HOSTS_PER_SWITCH,
                         f"at most {MAX_HOSTS_PER_SWITCH} hosts per switch")
    total = switches * per_switch
    if total > MAX_HOSTS:
        raise TopologyError(f"{kind}: {key}={per_switch} on {switches:,} switches gives "
                            f"{total:,} hosts, above the largest supported {MAX_HOSTS:,}; "
                            f"expected {key} <= {MAX_HOSTS // switches}")
    return per_switch


def check_vcs(vcs, what: str = "--vcs") -> int:
    """A forced VC count: an integer ``1 <= vcs <= MAX_VCS``, else :class:`BadInput`."""
    if not _is_int(vcs) or not 1 <= vcs <= MAX_VCS:
        raise BadInput(f"{what} {vcs!r:.40}; expected a VC count 1 <= VCS <= {MAX_VCS}")
    return int(vcs)


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_int(text: str) -> int:
    """``text`` as an integer written in ASCII digits (an optional sign, nothing else):
    Python's ``int`` also reads ``1_3`` and full-width or other Unicode digits, which on a
    command line are typos, not numbers.  ``ValueError`` otherwise."""
    if not isinstance(text, str) or not _INT.fullmatch(text.strip()):
        raise ValueError(f"{text!r:.40} is not an integer")
    return int(text)


def parse_float(text: str) -> float:
    """``text`` as a finite decimal number in ASCII (``0.5``, ``.5``, ``5e-1``): not
    ``nan``, ``inf``, ``1_0`` or Unicode digits.  ``ValueError`` otherwise."""
    if not isinstance(text, str) or not _FLOAT.fullmatch(text.strip()):
        raise ValueError(f"{text!r:.40} is not a number")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r:.40} is not a finite number")
    return value


def int_option(lo: int, hi: int, what: str):
    """An argparse ``type=``: the option's text as an integer ``lo <= value <= hi``.  argparse
    turns the error into one line and exit code 2 (``fabroute.cli._Parser``)."""

    def parse(text: str) -> int:
        try:
            value = parse_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r:.40} is not an integer; expected {what} {lo} <= N <= {hi}") from None
        if not lo <= value <= hi:
            side, bound = ("above the largest", hi) if value > hi else ("below the smallest", lo)
            raise argparse.ArgumentTypeError(
                f"{str(value):.40} is {side} supported {what} {bound}; expected {lo} <= N <= {hi}")
        return value

    parse.__name__ = what  # argparse names the type in its own messages
    return parse


def float_option(lo: float, hi: float, what: str):
    """An argparse ``type=``: the option's text as a finite number ``lo <= value <= hi``."""

    def parse(text: str) -> float:
        try:
            value = parse_float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r:.40} is not a number; expected {what} {lo:g} <= X <= {hi:g}") from None
        if not lo <= value <= hi:          # NaN fails both comparisons
            raise argparse.ArgumentTypeError(
                f"{text:.40} is out of range; expected {what} {lo:g} <= X <= {hi:g}")
        return value

    parse.__name__ = what
    return parse


#: argparse types of the options several commands share.
vcs_option = int_option(1, MAX_VCS, "VC count")
seed_option = int_option(0, SEED_BOUND - 1, "seed")
jobs_option = int_option(1, MAX_JOBS, "worker count")
lmc_option = int_option(0, MAX_LMC, "LMC")
switch_option = int_option(0, MAX_SWITCHES - 1, "switch id")
switches_option = int_option(1, MAX_SWITCHES, "switch count")
hosts_option = int_option(1, MAX_HOSTS_PER_SWITCH, "hosts per switch")
samples_option = int_option(0, MAX_HOSTS, "host pair count")
paths_option = int_option(0, 2**31 - 1, "PathRecord count")
timeout_option = float_option(1.0, 86_400.0, "timeout in seconds")
rate_option = float_option(0.1, 100_000.0, "probes per second")


def number_option(text: str) -> float:
    """An argparse ``type=`` for a number the command checks itself (:func:`parse_float`)."""
    try:
        return parse_float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e}; expected a decimal number") from None


number_option.__name__ = "number"
#: the adaptive controller and the emulation's traffic (docs/openflow.md, docs/emulation.md)
poll_option = float_option(0.05, 60.0, "poll interval in seconds")
link_mbit_option = float_option(0.01, 100_000.0, "link capacity in Mbit/s")
split_bits_option = int_option(1, 6, "split width in bits")
hysteresis_option = float_option(0.0, 10.0, "hysteresis")
load_option = float_option(0.001, 1.0, "load as a fraction of the link capacity")
duration_option = float_option(1.0, 3600.0, "seconds per traffic phase")
drain_option = float_option(0.0, 60.0, "drain time in seconds")
settle_option = float_option(0.5, 600.0, "settle time in seconds")
prepare_option = int_option(0, 1 << 20, "MiB of prepared repairs")
generation_option = int_option(0, 2**64 - 1, "OpenFlow generation id")
DRAIN_S = 0.5       # two-phase updates: the old version's drain (1 Mbit/s links: 3 x 224 ms)
SETTLE_S = 3.0         # controller --lldp: the cabling is complete after this long unchanged
PREPARE_MIB = 256      # controller: serialised repairs made ready while idle, at most
