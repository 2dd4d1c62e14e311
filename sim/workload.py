"""Seeded workload generators: Poisson arrivals, lognormal lengths, several clients, on/off patterns, abandonment
(docs/SCENARIO.md#workload).

``generate(WorkloadSpec)`` returns request specs; the same spec and seed always give the same requests. All
randomness flows from one ``np.random.default_rng(seed)``.

Arrivals are a Poisson process of ``rate_per_step`` requests per engine step, split between clients by their
``share`` (or a client's own ``rate_per_step``). A client sends only while it is on: from ``start_step`` to
``stop_step``, and within that, ``on_steps`` on then ``off_steps`` off, repeating (0 = always on).
With ``rate_per_s`` instead, arrivals are a Poisson process on the run's clock, open loop: each request gets an
``arrival_ms`` (rounded to ``MS_DECIMALS``) whatever the engine does meanwhile, as a server's clients send on the
wall clock (docs/ENGINE.md#the-step-loop). Clients' rates are then per second too (``ClientSpec.rate_per_s``), and the
settings counted in steps (clients' windows, abandonment) are refused.
Lengths are lognormal with the given median and sigma (sigma 0 = every request the median), clipped to the max.
A fraction ``abandon_rate`` of users close the tab part-way: ``abort_step = arrival + f * output_len`` (rounded, and
at most ``output_len - 1``: before the answer could be complete) where the fraction ``f`` follows ``abandon_point``
(uniform over the answer, early, or late). The clock starts at arrival, so a user may leave while still queued.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import FieldError, check_float, check_int
from .request import RequestSpec

ABANDON_POINTS = ("uniform", "early", "late")
W = "workload"  # where a workload's settings sit (FieldError.within): a scenario file's key
MIN_RATE = 1e-6  # requests per step: slower than one a million steps cannot fill a run within max_steps anyway
MIN_RATE_S = 1e-6  # requests per second (one in ~12 days of the run's clock)
MAX_RATE_S = 1_000_000.0  # requests per second (a thousand a ms: far past any step's length)
MS_DECIMALS = 3  # a generated arrival_ms is rounded to a microsecond, so a file keeps it exactly
_STEP_SETTINGS = ("start_step", "stop_step", "on_steps", "off_steps")  # a client's settings counted in steps


@dataclass(frozen=True)
class ClientSpec:
    client_id: str = "default"
    share: float = 1.0  # fraction of the total arrival rate (shares are normalised)
    rate_per_step: float | None = None  # absolute arrival rate, overrides share
    rate_per_s: float | None = None  # the same per second, in a workload with rate_per_s (arrivals on the clock)
    prompt_median: int | None = None  # overrides of the workload's lengths
    output_median: int | None = None
    priority: int = 0
    slo: bool = True  # its requests' ``slo``: False for batch traffic, which has no latency target
    start_step: int = 0
    stop_step: int | None = None  # sends nothing from this step on
    on_steps: int = 0  # on/off pattern (0 = always on)
    off_steps: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.client_id, str) or not self.client_id:
            raise FieldError("client_id", f"must be a non-empty string, got {self.client_id!r}",
                             within="workload.clients", value=self.client_id)
        where: dict[str, Any] = {"within": f"workload.clients[{self.client_id}]", "item": self.client_id}
        check_float("share", self.share, 0.0, **where)
        if self.rate_per_step is not None:
            check_float("rate_per_step", self.rate_per_step, 0.0, 1000.0, **where)
        if self.rate_per_s is not None:
            check_float("rate_per_s", self.rate_per_s, 0.0, MAX_RATE_S, **where)
            if self.rate_per_step is not None:
                raise FieldError("rate_per_s", "give one of rate_per_step and rate_per_s, not both",
                                 value=self.rate_per_s, **where)
        for name in ("prompt_median", "output_median"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, 1_000_000, **where)
        check_int("priority", self.priority, -(10**9), 10**9, **where)
        if not isinstance(self.slo, bool):
            raise FieldError("slo", f"must be true or false, got {self.slo!r}", value=self.slo, **where)
        check_int("start_step", self.start_step, 0, 10_000_000, **where)  # (no run lasts longer: config.max_steps)
        if self.stop_step is not None:
            check_int("stop_step", self.stop_step, self.start_step + 1, **where)
        check_int("on_steps", self.on_steps, 0, **where)
        check_int("off_steps", self.off_steps, 0, **where)

    def is_on(self, steps: np.ndarray) -> np.ndarray:
        on = steps >= self.start_step
        if self.stop_step is not None:
            on &= steps < self.stop_step
        if self.on_steps and self.off_steps:
            on &= (steps - self.start_step) % (self.on_steps + self.off_steps) < self.on_steps
        return on


@dataclass(frozen=True)
class WorkloadSpec:
    generator: str = "poisson"
    num_requests: int = 200
    rate_per_step: float | None = 0.5  # total arrival rate, requests per engine step (None: rate_per_s instead)
    prompt_median: int = 200
    prompt_sigma: float = 0.8
    prompt_max: int = 4096  # cap on a prompt's own tokens; the shared prefix_len comes on top
    output_median: int = 150
    output_sigma: float = 0.8
    output_max: int = 2048
    clients: tuple[ClientSpec, ...] = field(default_factory=lambda: (ClientSpec(),))
    abandon_rate: float = 0.0
    abandon_point: str = "uniform"
    prefix_len: int = 0  # shared system-prompt tokens, one prefix group per client
    seed: int = 0
    # total arrival rate, requests per second of the run's clock, instead of rate_per_step (which is then None): the
    # requests arrive by the clock (arrival_ms), open loop
    rate_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.generator != "poisson":
            raise FieldError("generator", f"{self.generator!r} is not one of: poisson", within=W, value=self.generator,
                             choices=("poisson",))
        check_int("num_requests", self.num_requests, 1, 200_000, within=W)
        if (self.rate_per_step is None) == (self.rate_per_s is None):
            raise FieldError("rate_per_s", "give exactly one of rate_per_step (requests per engine step) and "
                             "rate_per_s (requests per second of the run's clock)"
                             + ("; set rate_per_step to None with rate_per_s" if self.rate_per_s is not None else ""),
                             within=W, value=self.rate_per_s)
        if self.rate_per_s is None:
            check_float("rate_per_step", self.rate_per_step, MIN_RATE, 1000.0, within=W)
        else:
            check_float("rate_per_s", self.rate_per_s, MIN_RATE_S, MAX_RATE_S, within=W)
        check_int("prompt_median", self.prompt_median, 1, 1_000_000, within=W)
        check_int("output_median", self.output_median, 1, 1_000_000, within=W)
        check_float("prompt_sigma", self.prompt_sigma, 0.0, 5.0, within=W)
        check_float("output_sigma", self.output_sigma, 0.0, 5.0, within=W)
        check_int("prompt_max", self.prompt_max, 1, 10_000_000, within=W)
        check_int("output_max", self.output_max, 1, 10_000_000, within=W)
        if not self.clients:
            raise FieldError("clients", "needs at least one client", within=W)
        ids = [c.client_id for c in self.clients]
        if len(set(ids)) != len(ids):
            raise FieldError("clients", "client ids must be unique", within=W)
        if self.on_clock:
            self._check_clients_on_the_clock()
        else:
            for c in self.clients:
                if c.rate_per_s is not None:
                    raise FieldError("rate_per_s", "a client's rate per second needs the workload's arrivals on the "
                                     "clock (workload.rate_per_s); this workload gives rate_per_step",
                                     within=f"{W}.clients[{c.client_id}]", item=c.client_id, value=c.rate_per_s)
        total_rate = client_rates(self).sum()
        unit, least = ("rate_per_s", MIN_RATE_S) if self.on_clock else ("rate_per_step", MIN_RATE)
        if not total_rate > 0:
            raise FieldError("clients", f"at least one client needs a share or a {unit} above 0", within=W)
        if total_rate < least:
            per = "second" if self.on_clock else "step"
            raise FieldError("clients", f"the clients' rates add up to {total_rate:.3g} requests per {per}; at least "
                             f"{least:g} is needed", within=W, value=float(total_rate), lo=least)
        check_float("abandon_rate", self.abandon_rate, 0.0, 1.0, within=W)
        if self.abandon_point not in ABANDON_POINTS:
            raise FieldError("abandon_point", f"{self.abandon_point!r} is not one of: {', '.join(ABANDON_POINTS)}",
                             within=W, value=self.abandon_point, choices=ABANDON_POINTS)
        check_int("prefix_len", self.prefix_len, 0, 1_000_000, within=W)
        check_int("seed", self.seed, 0, 2**32 - 1, within=W)
        if self.on_clock and self.abandon_rate:
            raise FieldError("abandon_rate", "users who leave part-way are counted in steps from arrival "
                             "(abort_step), which a request arriving by the clock cannot give: 0 with rate_per_s "
                             "(config.timeout_steps still applies)", within=W, value=self.abandon_rate, hi=0.0)

    @property
    def on_clock(self) -> bool:
        """Arrivals on the run's clock (``rate_per_s``: each request gets an ``arrival_ms``), else by step."""
        return self.rate_per_s is not None

    def _check_clients_on_the_clock(self) -> None:
        """With rate_per_s, no client gives a rate per step or a window counted in steps."""
        default = ClientSpec()
        for c in self.clients:
            where: dict[str, Any] = {"within": f"{W}.clients[{c.client_id}]", "item": c.client_id}
            if c.rate_per_step is not None:
                raise FieldError("rate_per_step", "the workload's arrivals are on the clock (rate_per_s): give the "
                                 "client's own rate as rate_per_s", value=c.rate_per_step, **where)
            for name in _STEP_SETTINGS:
                if getattr(c, name) != getattr(default, name):
                    raise FieldError(name, "counted in engine steps, which a workload on the clock (rate_per_s) "
                                     "does not use: leave it out (a client sends all the time)",
                                     value=getattr(c, name), **where)

    def replace(self, **changes: Any) -> WorkloadSpec:
        return dataclasses.replace(self, **changes)


class TooFewArrivals(FieldError):
    """The clients' sending windows let fewer than ``num_requests`` requests arrive: only ``num_arrived`` by step
    ``until_step``. ``closed``: every window had closed for good by then (each client's ``stop_step``); else the
    on/off patterns kept them out, ``num_drawn`` Poisson arrivals drawn in vain (None: 50 times the time the
    clients that never stop need on average had passed). About ``workload.clients``; the message is made from
    these."""

    def __init__(self, num_arrived: int, num_requests: int, until_step: int, *, closed: bool = False,
                 num_drawn: int | None = None):
        self.num_arrived, self.num_requests, self.until_step = num_arrived, num_requests, until_step
        self.closed, self.num_drawn = closed, num_drawn
        got = f"{num_arrived} of {num_requests} requests"
        if closed:
            what = f"windows close by step {until_step:,} (stop_step) after only {got}"
        elif num_drawn is not None:
            what = (f"on/off windows let through only {got} in {num_drawn:,} Poisson arrivals (up to step "
                    f"{until_step:,})")
        else:
            what = f"on/off windows gave only {got} in {until_step:,} steps"
        super().__init__("clients", f"the clients' {what}; widen them or lower num_requests", within=W,
                         value=num_requests)


def client_rates(spec: WorkloadSpec) -> np.ndarray:
    """[clients] arrival rate of each client while it is on, requests per step (per second with ``rate_per_s``)."""
    field, rate = ("rate_per_s", spec.rate_per_s) if spec.on_clock else ("rate_per_step", spec.rate_per_step)
    own = [getattr(c, field) for c in spec.clients]
    total_share = sum(c.share for c, r in zip(spec.clients, own, strict=True) if r is None)
    return np.array([
        r if r is not None else (rate * c.share / total_share if total_share else 0.0)
        for c, r in zip(spec.clients, own, strict=True)
    ])


class _OnWindows:
    """Every client's ``is_on`` at once: one pass over a batch of arrivals, not one per client (a workload of
    thousands of clients made the thinning quadratic)."""

    def __init__(self, clients: tuple[ClientSpec, ...]):
        self.start = np.array([c.start_step for c in clients], dtype=np.int64)  # [clients]
        self.stop = np.array([np.iinfo(np.int64).max if c.stop_step is None else c.stop_step for c in clients],
                             dtype=np.int64)  # [clients], int64 max = never stops
        has_pattern = np.array([bool(c.on_steps and c.off_steps) for c in clients])
        # (no pattern: x % 1 == 0 < 1, always on)
        self.period = np.array([c.on_steps + c.off_steps if p else 1 for c, p in zip(clients, has_pattern,
                                                                                      strict=True)], dtype=np.int64)
        self.on = np.array([c.on_steps if p else 1 for c, p in zip(clients, has_pattern, strict=True)],
                           dtype=np.int64)

    def is_on(self, who: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """[k] bool: client ``who[i]`` sends at ``steps[i]`` (``ClientSpec.is_on``, element by element)."""
        start = self.start[who]
        return (steps >= start) & (steps < self.stop[who]) & ((steps - start) % self.period[who] < self.on[who])


def _lognormal_lengths(rng: np.random.Generator, medians: np.ndarray, sigma: float, maximum: int) -> np.ndarray:
    z = rng.standard_normal(len(medians))
    return np.clip(np.rint(medians * np.exp(sigma * z)), 1, maximum).astype(np.int64)


def _abandon_fractions(rng: np.random.Generator, point: str, n: int) -> np.ndarray:
    if point == "early":
        return rng.beta(1.0, 3.0, n)
    if point == "late":
        return rng.beta(3.0, 1.0, n)
    return rng.uniform(0.0, 1.0, n)


def _arrivals_on_the_clock(spec: WorkloadSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(arrival times in ms, rounded to MS_DECIMALS; client index) of ``num_requests`` arrivals of one Poisson
    process of ``rate_per_s``, each given to a client in proportion to the clients' rates (every client always on)."""
    rates = client_rates(spec)
    total = rates.sum()
    n = spec.num_requests
    times = np.cumsum(rng.exponential(1000.0 / total, n))
    who = rng.choice(len(rates), size=n, p=rates / total)
    return np.round(times, MS_DECIMALS), who


def _arrivals(spec: WorkloadSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(arrival steps, client index) of the first ``num_requests`` arrivals, by thinning one Poisson process."""
    if spec.on_clock:
        return _arrivals_on_the_clock(spec, rng)
    rates = client_rates(spec)
    total = rates.sum()
    steps: list[np.ndarray] = []
    clients: list[np.ndarray] = []
    # Nobody sends before the first client starts (a Poisson process has no memory: start the clock there).
    count, clock = 0, float(min(c.start_step for c in spec.clients))
    # Give up only once the windows cannot plausibly yield the requests: every window has closed for good, or the
    # clients that send forever have had 50 times the time they need on average (their on-time share counted).
    closes = max((c.stop_step for c in spec.clients if c.stop_step is not None), default=0)
    forever = sum(rate * (c.on_steps / (c.on_steps + c.off_steps) if c.on_steps and c.off_steps else 1.0)
                  for rate, c in zip(rates, spec.clients, strict=True) if c.stop_step is None)
    horizon = float(closes)
    if forever > 0:
        period = max(c.on_steps + c.off_steps for c in spec.clients)
        horizon = max(horizon, 50 * spec.num_requests / forever + max(c.start_step for c in spec.clients)
                      + period + 1000)
    # ... or once the thinning has drawn this many arrivals (~0.1 s of numpy): windows that keep almost every
    # arrival out would otherwise draw for hours before the clock reached the horizon
    drawn, max_draws = 0, 100 * spec.num_requests + 1_000_000
    on_windows = _OnWindows(spec.clients)
    while count < spec.num_requests:
        batch = max(2 * (spec.num_requests - count), 64)
        drawn += batch
        times = clock + np.cumsum(rng.exponential(1.0 / total, batch))
        who = rng.choice(len(rates), size=batch, p=rates / total)
        clock = float(times[-1])
        step = np.floor(times).astype(np.int64)
        keep = on_windows.is_on(who, step)
        steps.append(step[keep])
        clients.append(who[keep])
        count += int(keep.sum())
        if (clock > horizon or drawn >= max_draws) and count < spec.num_requests:
            if clock <= horizon:
                raise TooFewArrivals(count, spec.num_requests, round(clock), num_drawn=drawn)
            if forever > 0:  # (50 times the expected time: a freak, but say what happened)
                raise TooFewArrivals(count, spec.num_requests, round(horizon))
            raise TooFewArrivals(count, spec.num_requests, closes, closed=True)
    return np.concatenate(steps)[: spec.num_requests], np.concatenate(clients)[: spec.num_requests]


def generate(spec: WorkloadSpec) -> list[RequestSpec]:
    rng = np.random.default_rng(spec.seed)
    arrival, client = _arrivals(spec, rng)
    n = len(arrival)
    prompt_medians = np.array([c.prompt_median or spec.prompt_median for c in spec.clients])[client]
    output_medians = np.array([c.output_median or spec.output_median for c in spec.clients])[client]
    prompt = _lognormal_lengths(rng, prompt_medians, spec.prompt_sigma, spec.prompt_max)
    output = _lognormal_lengths(rng, output_medians, spec.output_sigma, spec.output_max)
    abandons = rng.uniform(size=n) < spec.abandon_rate
    fractions = _abandon_fractions(rng, spec.abandon_point, n)
    requests = []
    on_clock = spec.on_clock
    for i in range(n):
        c = spec.clients[client[i]]
        # Leave before the answer could be complete: at most output_len - 1 steps after arrival.
        abort = int(arrival[i] + min(round(fractions[i] * output[i]), output[i] - 1)) if abandons[i] else None
        requests.append(RequestSpec(
            request_id=f"{c.client_id}-{i}" if len(spec.clients) > 1 else f"r{i}",
            arrival_step=None if on_clock else int(arrival[i]),
            arrival_ms=float(arrival[i]) if on_clock else None,
            prompt_len=int(prompt[i]) + spec.prefix_len,
            output_len=int(output[i]),
            client_id=c.client_id,
            priority=c.priority,
            abort_step=abort,
            prefix_group=f"{c.client_id}-system" if spec.prefix_len else None,
            prefix_len=spec.prefix_len,
            slo=c.slo,
        ))
    return requests


_CLIENT_FIELDS = {f.name for f in dataclasses.fields(ClientSpec)}
_WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(WorkloadSpec)}


def workload_from_dict(data: Any) -> WorkloadSpec:
    if not isinstance(data, dict):
        raise FieldError("workload", f"must be a JSON object, got {type(data).__name__}", value=data)
    extra = sorted(set(data) - _WORKLOAD_FIELDS)
    if extra:
        raise FieldError("workload", f"unknown key {extra[0]!r}; allowed keys: {', '.join(sorted(_WORKLOAD_FIELDS))}",
                         value=extra[0], choices=tuple(sorted(_WORKLOAD_FIELDS)))
    data = dict(data)
    if data.get("rate_per_s") is not None:  # (instead of rate_per_step: give one of them)
        if "rate_per_step" in data:
            raise FieldError("rate_per_s", "give one of rate_per_step (requests per engine step) and rate_per_s "
                             "(requests per second of the run's clock), not both", within=W, value=data["rate_per_s"])
        data["rate_per_step"] = None
    if "clients" in data:
        items = data["clients"]
        if not isinstance(items, list) or not items:
            raise FieldError("clients", "must be a non-empty list of client objects", within=W, value=items)
        clients = []
        for i, c in enumerate(items):
            if not isinstance(c, dict):
                raise FieldError(f"clients[{i}]", "must be a JSON object", within=W, value=c)
            extra = sorted(set(c) - _CLIENT_FIELDS)
            if extra:
                raise FieldError(f"clients[{i}]", f"unknown key {extra[0]!r}; allowed keys: "
                                 f"{', '.join(sorted(_CLIENT_FIELDS))}", within=W, value=extra[0],
                                 choices=tuple(sorted(_CLIENT_FIELDS)))
            clients.append(ClientSpec(**c))
        data["clients"] = tuple(clients)
    try:
        return WorkloadSpec(**data)
    except TypeError as e:
        raise FieldError("workload", str(e)) from None


def workload_to_dict(spec: WorkloadSpec) -> dict[str, Any]:
    default_client = ClientSpec()
    out: dict[str, Any] = {}
    for f in dataclasses.fields(WorkloadSpec):
        value = getattr(spec, f.name)
        if f.name == "rate_per_s":
            continue
        if f.name == "rate_per_step" and value is None:  # (the one of the two it gives, in the same place)
            out["rate_per_s"] = spec.rate_per_s
        elif f.name == "clients":
            out["clients"] = [
                {k.name: getattr(c, k.name) for k in dataclasses.fields(ClientSpec)
                 if k.name == "client_id" or getattr(c, k.name) != getattr(default_client, k.name)}
                for c in value
            ]
        else:
            out[f.name] = value
    return out
