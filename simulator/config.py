"""Simulation parameters: :class:`SimConfig` (every parameter with its default).

Load from a TOML or JSON file with :meth:`SimConfig.load`; unknown keys are an error.  An
experiment file (``simulator/experiments/*.toml``) may also carry the keys of
:data:`EXPERIMENT_KEYS` (topology, routings, traffic, loads, seed, output path ``out``
without suffix, ``workers``; ``vary``, ``values``, ``references``: :mod:`simulator.vary`),
which :func:`load_experiment` separates from the simulation parameters.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tablegen.routing.names import ROUTINGS as NAMES

EXPERIMENT_KEYS = ("name", "figure", "spec", "routings", "traffic", "loads", "seed", "note",
                   "out", "workers", "vary", "values", "references")

#: Cycles at most in one window of a run (a warm-up period, the measurement window, the
#: deadlock watch): 10^7 cycles is already hours of wall time on the fabrics simulated here
#: (Slim Fly q=19 runs 36 cycles/s, ``benchmarks/RESULTS.md``); the committed experiments use
#: at most 20,000.
MAX_CYCLES = 10_000_000

#: ``(smallest, largest)`` of every integer key.  The upper bounds bound what a run allocates
#: and how long it runs: queues and packet pools grow with the buffer sizes (per network VC,
#: per port) and ``source_queue_cap`` (per host), the event rings with the latencies times
#: the speedup, the latency histogram with ``latency_hist_max`` (8 bytes a bin), the run time
#: with the cycle counts.  Each is far above what the committed experiments use
#: (``simulator/experiments/*.toml``: buffers of at most 66 flits, packets of 33, latencies
#: of 37 cycles).
INT_RANGES = {
    "packet_size": (1, 256),
    "buffer_depth": (1, 4096),
    "injection_buffer": (0, 4096),
    "output_buffer": (0, 4096),
    "source_queue_cap": (1, 65_536),
    "router_delay": (0, 1024),
    "channel_latency": (1, 1024),
    "terminal_latency": (0, 1024),
    "credit_latency": (0, 1024),
    "islip_iterations": (1, 16),
    "ugal_threshold": (0, 4096),
    "warmup_cycles": (1, MAX_CYCLES),
    "warmup_max_periods": (1, 100),
    "measure_cycles": (1, MAX_CYCLES),
    "drain_max_cycles": (0, 4 * MAX_CYCLES),
    "deadlock_cycles": (1, MAX_CYCLES),
    "latency_hist_max": (1, 1 << 22),
    # ugal-sdn (simulator/sdn.py): a poll runs the controller's estimator and decision in
    # Python (≈ 7 ms on the 1,056-node Dragonfly), so polls are at least 10 cycles apart
    "poll_cycles": (10, MAX_CYCLES),
    "decision_delay_cycles": (0, MAX_CYCLES),
    "split_bits": (1, 6),               # tablegen.routing.adaptive.PARAM_RANGES
    "sdn_buffer": (1, 1_000_000),       # PARAM_RANGES["buffer"], in packets
}
#: ``(smallest, largest)`` of the keys that are multiples of 1/SPEEDUP_STEPS: the crossbar's
#: internal speedup (Yébenes et al.: 2.5), run as floor((t+1)·S) - floor(t·S) allocation
#: rounds in cycle t (an integer S: S rounds every cycle)
QUARTER_RANGES = {"speedup": (1, 16)}
SPEEDUP_STEPS = 4
#: None: buffer_depth // 2; poll_cycles // 2; (V * buffer_depth + output queue) / packet_size
NULLABLE = {"ugal_threshold", "decision_delay_cycles", "sdn_buffer"}
#: ``(smallest, largest)`` of the keys that are numbers (an integer is accepted too); the
#: ``sdn_*`` ranges are :data:`tablegen.routing.adaptive.PARAM_RANGES` (tested equal; not
#: imported: that module loads Numba, and this one is read at every command's start)
FLOAT_RANGES = {"warmup_tol": (0.0, 10.0), "saturation_ratio": (0.0, 1.0),
                "sdn_alpha": (0.01, 1.0), "sdn_hysteresis": (0.0, 10.0),
                "sdn_floor": (0.0, 1e6), "sdn_gain": (0.01, 10.0)}
MAX_FILE_BYTES = 1 << 20        #: a config or experiment file (the committed ones: < 2 KiB)
#: The simulator's model version: part of every stored sweep point's key
#: (:mod:`simulator.store`).  Raise it with any change of the engine, the run method, the
#: traffic patterns or a default that alters a result for the same inputs (tables and
#: config); a change that alters none (a new option, off by default) keeps it.
MODEL_VERSION = 1


@dataclass
class SimConfig:
    """Every parameter of a run.  Times are in cycles (one flit time on a channel); buffer
    sizes in flits.  See ``docs/simulator.md`` for what each one models."""

    # packets and buffers
    packet_size: int = 1              #: flits per packet
    buffer_depth: int = 16            #: flits per input VC (network ports)
    injection_buffer: int = 0         #: flits of the injection port's buffer (0: buffer_depth)
    output_buffer: int = 0            #: flits per output queue (0: packet_size, or
    #: speedup * buffer_depth when speedup > 1)
    source_queue_cap: int = 4096      #: packets a host's source queue holds before it overflows
    # router and channels
    router_delay: int = 1             #: cycles from a head's arrival to switch allocation
    channel_latency: int = 1          #: cycles a flit spends on a router-router channel
    terminal_latency: int = 1         #: cycles on a host-router channel (each direction)
    credit_latency: int = 0           #: cycles for a credit to return (0: channel_latency)
    speedup: float = 1                #: internal speedup S, a multiple of 1/4 (crossbar rounds
    #: per cycle: S flits per cycle per input and output)
    flow_control: str = "vct"         #: ``vct`` (virtual cut-through) or ``wormhole``
    allocator: str = "rr"             #: ``rr``: separable input-first round-robin; ``islip``
    vc_allocation: str = "combined"   #: ``combined`` (VC from the tables, taken at switch
    #: allocation) or ``per-packet`` (BookSim's iq: a VC-allocation cycle, the VC held until
    #: the packet has crossed, VCs on ejection and injection ports too; VCT only)
    islip_iterations: int = 1         #: iSLIP iterations per allocation round
    # routing decisions (UGAL); classes, tables and VCs come from the TableSet
    ugal: str = "local"               #: ``local`` (UGAL-L), ``global`` (UGAL-G), ``sdn``
    ugal_rule: str = "auto"           #: ``kim``, ``yebenes``, ``vch``; auto: kim on Dragonfly
    ugal_threshold: int | None = None  #: Yébenes' T in flits (None: buffer_depth // 2)
    ugal_g_reading: str = "backlog-hops"  #: ``backlog-hops``, ``backlog``, ``credits-hops``
    ugal_cr: bool = False             #: UGAL-L_CR: credits delayed by credit round trips (VCT)
    # ugal-sdn: the adaptive controller's loop (simulator/sdn.py); the sdn_* knobs are
    # tablegen.routing.adaptive.AdaptiveParams' (defaults equal, tested)
    poll_cycles: int = 1000           #: cycles between two reads of the port counters
    decision_delay_cycles: int | None = None  #: poll to shares in effect (None: poll // 2)
    split_bits: int = 3               #: shares move in steps of 1 / 2**split_bits
    sdn_counters: str = "tx-wait"     #: ``tx-wait`` (sent + PortXmitWait) or ``tx`` (sent)
    sdn_alpha: float = 0.5            #: EWMA weight of the newest poll's offered load
    sdn_buffer: int | None = None     #: packets a port holds, M/M/1/B's B (None: see sdn.py)
    sdn_hysteresis: float = 0.25      #: dead band, a share of the costs' queueing part
    sdn_floor: float = 0.5            #: absolute margin (packets x hops) before moving up
    sdn_gain: float = 1.0             #: move up: gain x relative cost difference x 2**split_bits
    # method
    warmup_cycles: int = 1000         #: length of one warm-up period
    warmup_max_periods: int = 5       #: warm-up periods at most before measuring anyway
    warmup_tol: float = 0.05          #: steady: mean latency of two periods within this ratio
    measure_cycles: int = 2000        #: measurement window: packets generated in it are labelled
    drain_max_cycles: int = 0         #: drain limit (0: 4 * measure_cycles + 2000)
    deadlock_cycles: int = 2000       #: packets in routers and none moved this long: deadlock
    saturation_ratio: float = 0.95    #: saturated when accepted < ratio * offered (or undrained)
    latency_hist_max: int = 65536     #: latency histogram bins (percentiles)
    # a preset: the keys of PRESETS[model], applied when ``model`` is set (see PRESETS)
    model: str = "fabroute"           #: ``fabroute`` or ``booksim-iq``

    CHOICES = {"flow_control": ("vct", "wormhole"), "allocator": ("rr", "islip"),
               "vc_allocation": ("combined", "per-packet"), "model": ("fabroute", "booksim-iq"),
               "ugal": ("local", "global", "sdn"), "sdn_counters": ("tx-wait", "tx"),
               "ugal_rule": ("auto", "kim", "yebenes", "vch"),
               "ugal_g_reading": ("backlog-hops", "backlog", "credits-hops")}

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Every key's type and range (:data:`INT_RANGES`, :data:`FLOAT_RANGES`,
        :attr:`CHOICES`): ``ValueError``, one line naming the key, its value and what was
        expected.  O(number of keys)."""
        for k, allowed in self.CHOICES.items():
            v = getattr(self, k)
            if not isinstance(v, str) or v not in allowed:
                raise ValueError(f"config: {k}={v!r:.60}; expected one of {', '.join(allowed)}")
        for k, (lo, hi) in INT_RANGES.items():
            v = getattr(self, k)
            if v is None and k in NULLABLE:
                continue
            # bool is an int and floats such as 1e12 pass int(): both are typos, not counts
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ValueError(f"config: {k}={v!r:.60}; expected an integer {lo} <= {k} <= "
                                 f"{hi:,}" + (" or null" if k in NULLABLE else ""))
        for k, (lo, hi) in QUARTER_RANGES.items():
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi \
                    or not float(v * SPEEDUP_STEPS).is_integer():
                raise ValueError(f"config: {k}={v!r:.60}; expected a multiple of "
                                 f"1/{SPEEDUP_STEPS} from {lo} to {hi} (e.g. 2.5)")
        for k, (lo, hi) in FLOAT_RANGES.items():
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
                raise ValueError(f"config: {k}={v!r:.60}; expected a number {lo} <= {k} <= {hi}")
        if not isinstance(self.ugal_cr, bool):
            raise ValueError(f"config: ugal_cr={self.ugal_cr!r:.60}; expected true or false")
        if self.vc_allocation == "per-packet" and self.flow_control != "vct":
            raise ValueError("config: vc_allocation='per-packet' with flow_control="
                             f"{self.flow_control!r}; expected vct")
        if self.ugal_cr and self.flow_control != "vct":
            raise ValueError("config: ugal_cr=true with flow_control="
                             f"{self.flow_control!r}; expected vct (credits per packet)")
        if self.flow_control == "vct" and self.buffer_depth < self.packet_size:
            raise ValueError(f"config: buffer_depth={self.buffer_depth} < packet_size="
                             f"{self.packet_size}; virtual cut-through needs a whole packet")

    # derived values -------------------------------------------------------------------------
    @property
    def speedup_ratio(self) -> tuple[int, int]:
        """The speedup as ``(rounds, cycles)``: ``rounds`` allocation rounds every ``cycles``
        cycles (2.5: 5 every 2)."""
        from fractions import Fraction

        f = Fraction(self.speedup).limit_denominator(SPEEDUP_STEPS)
        return f.numerator, f.denominator

    @property
    def credit_lat(self) -> int:
        return self.credit_latency or self.channel_latency

    @property
    def inj_buffer(self) -> int:
        return self.injection_buffer or self.buffer_depth

    @property
    def out_buffer(self) -> int:
        auto = self.packet_size if self.speedup == 1 else \
            math.ceil(self.speedup * self.buffer_depth)
        return max(self.output_buffer or auto, self.packet_size)

    @property
    def drain_limit(self) -> int:
        return self.drain_max_cycles or 4 * self.measure_cycles + 2000

    @property
    def decision_delay(self) -> int:
        d = self.decision_delay_cycles
        return self.poll_cycles // 2 if d is None else d

    @property
    def threshold(self) -> int:
        return self.buffer_depth // 2 if self.ugal_threshold is None else int(self.ugal_threshold)

    # serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SimConfig":
        """A config from a table of keys; a ``model`` preset fills the keys it sets that the
        table does not give."""
        if not isinstance(d, dict):
            raise ValueError(f"config: {type(d).__name__} {d!r:.60}; expected a table of "
                             "SimConfig keys")
        if isinstance(d.get("model"), str) and d["model"] in PRESETS:
            d = {**PRESETS[d["model"]], **d}
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            shown = sorted(k if isinstance(k, str) and k.isidentifier() else repr(k)[:40]
                           for k in unknown)   # one line, whatever the key
            raise ValueError(f"config: unknown key(s) {', '.join(shown)}; expected "
                             f"some of {', '.join(sorted(names))}")
        return cls(**d)

    @classmethod
    def load(cls, path) -> "SimConfig":
        return cls.from_dict(read_file(path))

    def replace(self, **kw) -> "SimConfig":
        """A copy with ``kw`` set; setting another ``model`` first applies its preset (so
        ``--set model=booksim-iq`` overrides the experiment's pipeline keys, and keys set
        beside it override the preset)."""
        d = self.to_dict()
        if isinstance(kw.get("model"), str) and kw["model"] != d["model"]:
            d.update(PRESETS.get(kw["model"], {}))
        d.update(kw)
        return SimConfig.from_dict(d)


#: ``model`` presets.  ``booksim-iq``: BookSim2's ``iq`` router with its default pipeline
#: (``docs/simulator.md``, *BookSim preset*): per-packet VC allocation in a cycle of its own
#: (the VC held until the packet has crossed; VCs on injection and ejection ports), routing
#: + VC allocation + switch allocation + traversal = 2 + 1 cycles of ``router_delay`` and
#: the VC-allocation cycle, credits usable 3 cycles after they leave (BookSim's
#: ``credit_delay = 2`` plus the cycle to process them), separable input-first round-robin
#: switch allocation, no internal speedup.
PRESETS = {"fabroute": {},
           "booksim-iq": {"vc_allocation": "per-packet", "router_delay": 2, "credit_latency": 4,
                          "allocator": "rr", "speedup": 1}}


def read_file(path) -> dict:
    """A TOML (``.toml``) or JSON file as a dict: a regular file of at most
    :data:`MAX_FILE_BYTES` (a FIFO or ``/dev/zero`` would block or fill the memory), else
    ``ValueError`` / ``OSError``."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"config file {str(p)!r:.80} is not a regular file; expected a .toml "
                         "or .json file")
    with p.open("rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"config file {str(p)!r:.80} is over {MAX_FILE_BYTES:,} bytes; "
                         "expected a table of SimConfig and experiment keys")
    text = data.decode()
    d = json.loads(text) if p.suffix != ".toml" else _toml(text)
    if not isinstance(d, dict):
        raise ValueError(f"config file {str(p)!r:.80} holds a {type(d).__name__}; expected a "
                         "table of keys")
    return d


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


def load_experiment(path) -> tuple[dict, SimConfig]:
    """Split an experiment file into its experiment keys and its :class:`SimConfig` (the
    ``[config]`` table, or every other top-level key)."""
    d = read_file(path)
    exp = {k: d[k] for k in EXPERIMENT_KEYS if k in d}
    rest = d.get("config", {k: v for k, v in d.items() if k not in EXPERIMENT_KEYS})
    return exp, SimConfig.from_dict(rest)


#: simulator routing name -> (tablegen routing, UGAL-L non-minimal class, the config keys
#: the name fixes: UGAL knowledge, Kim's UGAL-L_VC_H rule, UGAL-G's reading; ugal-sdn:
#: UGAL-L's tables, decided per (source, destination key) by the adaptive controller's loop);
#: the one vocabulary of every command is :mod:`tablegen.routing.names`
ROUTINGS = {n: (r.tables, r.nonmin, dict(r.config)) for n, r in NAMES.items()}
