"""Configuration: the engine, the model's KV footprint and the step cost model.

Everything here is a frozen dataclass validated in ``__post_init__``: a bad value raises ``FieldError`` (a
``ValueError``) naming the field and the allowed range, as data and in words. Each field carries
``metadata["help"]`` (with its unit) so the UI can reuse it as a tooltip. Units are in the names: ``_steps``,
``_ms``, ``_us``, ``_bytes``, ``_gb_s``, ``_blocks``.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import math
from dataclasses import dataclass, field
from typing import Any

MAX_CPU_BLOCKS = 100_000_000  # the most CPU swap blocks a config may have (num_cpu_blocks)
MAX_SLO_MS = 3_600_000.0  # the longest SLO target, ms (an hour)


class Policy(enum.StrEnum):
    """Waiting-queue orders' names. ``fcfs`` and ``priority`` are vLLM's; the rest are teaching extensions. Each
    policy's record (its queue, label, knobs...) is in ``sim.policies.POLICIES``."""

    FCFS = "fcfs"
    PRIORITY = "priority"
    SJF = "sjf"
    SJF_PREDICTED = "sjf_predicted"
    VTC = "vtc"
    LCF = "lcf"


class PreemptionMode(enum.StrEnum):
    RECOMPUTE = "recompute"
    SWAP = "swap"


class StopCheck(enum.StrEnum):
    """``every_step``: stop on the step the stop token appears. ``at_max_tokens``: only at the length limit."""

    EVERY_STEP = "every_step"
    AT_MAX_TOKENS = "at_max_tokens"


def _help(text: str, **kw: Any) -> Any:
    return field(metadata={"help": text}, **kw)


class ScenarioError(ValueError):
    """An invalid scenario: the message names the field and what is allowed. (Here, beside ``FieldError``, so that
    ``sim.cost_estimate``, which ``sim.scenario`` imports, can raise it too.)"""


class FieldError(ValueError):
    """Bad input, as data: which setting, what was given, what is allowed. The checks of a setting raise one
    (``check_int``, ``check_float``, ``choice``, and the rules of the config's and the workload's dataclasses).

    ``name``: the setting's own name ('num_requests', 'stop_step'); ``within``: where it sits ('workload',
    'workload.clients[A]', '' at the top of its object), ``field`` the two joined; ``item``: the id of the list
    entry it belongs to (a client's), else None. ``value``: what was given (None for a rule about several values).
    What is allowed: a range ``lo``..``hi`` (None: no bound on that side; ``lo_open``/``hi_open``: the bound itself
    excluded), or ``choices``. ``problem``: the words after the field, made from these by whoever checks.

    ``str()`` is ``f"{field}: {problem}"``, the line a scenario file's author reads ('workload.num_requests: must
    be between 1 and 200000, got 0'). A reader who knows the setting by another name (a page's slider) words it
    from the fields, never from the text. ``at(outer)`` is the same error seen from the object that holds this one
    (a config inside a scenario file: 'config.num_blocks')."""

    def __init__(self, name: str, problem: str, *, within: str = "", item: str | None = None, value: Any = None,
                 lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False,
                 choices: tuple[str, ...] = ()):
        self.name, self.problem, self.within, self.item, self.value = name, problem, within, item, value
        self.lo, self.hi, self.lo_open, self.hi_open, self.choices = lo, hi, lo_open, hi_open, tuple(choices)
        super().__init__(str(self))

    @property
    def field(self) -> str:
        return f"{self.within}.{self.name}" if self.within else self.name

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"

    def at(self, outer: str) -> FieldError:
        """This error with ``outer`` in front of where it sits."""
        error = copy.copy(self)
        error.within = f"{outer}.{self.within}" if self.within else outer
        error.args = (str(error),)
        return error

    def __reduce__(self) -> tuple:  # (its fields, not its message: a worker process's error comes back whole)
        return _restored, (type(self), dict(self.__dict__))


def _restored(cls: type[FieldError], state: dict[str, Any]) -> FieldError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    error.args = (str(error),)
    return error


def choice(enum_cls: type[enum.StrEnum], value: Any, field_name: str) -> enum.StrEnum:
    """Parse ``value`` into ``enum_cls``; the error lists the valid names."""
    try:
        return enum_cls(value)
    except ValueError:
        valid = tuple(m.value for m in enum_cls)
        raise FieldError(field_name, f"{value!r} is not one of: {', '.join(valid)}", value=value,
                         choices=valid) from None


# The policies' records by name. They are declared in sim/policies.py, which fills this table as sim is imported
# (``import sim.config`` runs sim/__init__.py first, which imports the scheduler and with it the records); the table
# lives here, where EngineConfig checks a policy's name, because the records hold queue classes that import this
# module. Read it through sim.policies (``POLICIES``, ``spec_of``, ``names``).
POLICIES: dict[str, Any] = {}


def policy_names() -> list[str]:
    """The registered policies' names: the ``Policy`` values in their order, then any others registered."""
    built_in = [p.value for p in Policy]
    return built_in + [n for n in POLICIES if n not in built_in]


def policy_name(value: object) -> Policy | str:
    """``value`` as ``EngineConfig.policy`` holds it: the ``Policy`` member of a built-in name, else the name of a
    registered record; ValueError lists the registered names."""
    if isinstance(value, str) and value in POLICIES:
        try:
            return Policy(value)
        except ValueError:
            return value
    raise FieldError("policy", f"{value!r} is not one of: {', '.join(policy_names())}", value=value,
                     choices=tuple(policy_names()))


# The largest number any setting may take: beyond it step counts and costs overflow the simulator's int64 and
# float arithmetic (2**63 steps, 1e308 us), long before any run could use them.
MAX_VALUE = 10**12


_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
              bool: "true/false", type(None): "null"}


def json_type(value: Any) -> str:
    """What a JSON reader calls ``value``'s type: 'a list', 'null' (not Python's 'NoneType')."""
    return _JSON_TYPE.get(type(value), type(value).__name__)


def check_int(name: str, value: Any, lo: int, hi: int | None = None, *, within: str = "",
              item: str | None = None) -> None:
    """``FieldError`` unless ``value`` is a whole number from ``lo`` to ``hi`` (None: no bound but the simulator's
    limit, ``MAX_VALUE``). ``within``, ``item``: where the setting sits (``FieldError``)."""
    where: dict[str, Any] = {"within": within, "item": item, "value": value, "lo": lo, "hi": hi}
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(name, f"must be an integer, got {value!r}", **where)
    if value < lo or (hi is not None and value > hi):
        allowed = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise FieldError(name, f"must be {allowed}, got {value}", **where)
    if value > MAX_VALUE:
        raise FieldError(name, f"must be at most {MAX_VALUE:,} (the simulator's limit), got {value:,}",
                         **where | {"hi": MAX_VALUE})


def check_float(name: str, value: Any, lo: float, hi: float | None = None, *, lo_open: bool = False,
                hi_open: bool = False, within: str = "", item: str | None = None) -> None:
    """``FieldError`` unless ``value`` is a finite number from ``lo`` to ``hi`` (``lo_open``, ``hi_open``: the
    bound excluded; None: no bound but ``MAX_VALUE``). ``within``, ``item``: where the setting sits."""
    where: dict[str, Any] = {"within": within, "item": item, "value": value, "lo": lo, "hi": hi, "lo_open": lo_open,
                             "hi_open": hi_open and hi is not None}
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FieldError(name, f"must be a finite number, got {value!r}", **where)
    too_high = hi is not None and (value >= hi if hi_open else value > hi)
    if (value <= lo if lo_open else value < lo) or too_high:
        low = f"> {lo}" if lo_open else f">= {lo}"
        allowed = low if hi is None else f"{low} and {'<' if hi_open else '<='} {hi}"
        raise FieldError(name, f"must be {allowed}, got {value}", **where)
    if value > MAX_VALUE:
        raise FieldError(name, f"must be at most {MAX_VALUE:,} (the simulator's limit), got {value:.3g}",
                         **where | {"hi": MAX_VALUE, "hi_open": False})


@dataclass(frozen=True)
class ModelSpec:
    """A decoder's KV cache footprint. KV bytes per token = 2 (K and V) x layers x KV heads x head dim x dtype."""

    name: str = _help("model name", default="Llama 3.1 8B")
    num_layers: int = _help("transformer layers", default=32)
    num_kv_heads: int = _help("KV heads (grouped-query attention)", default=8)
    head_dim: int = _help("dimension of one attention head", default=128)
    dtype_bytes: int = _help("bytes per KV element (2 = fp16/bf16)", default=2)
    max_position_embeddings: int = _help("context length, tokens: vLLM's default max_model_len", default=131_072)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise FieldError("name", f"must be a string, got {self.name!r}", within="model", value=self.name)
        # (ranges past any real model: 1 to 1,024 layers and KV heads, heads of up to 4,096, up to 8 bytes a value,
        # contexts of up to 10 million tokens, the longest prompt a request may have)
        for name, hi in (("num_layers", 1024), ("num_kv_heads", 1024), ("head_dim", 4096), ("dtype_bytes", 8),
                         ("max_position_embeddings", 10_000_000)):
            check_int(name, getattr(self, name), 1, hi, within="model")

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes


# Named models for the UI's model picker. Values from the models' published configs (config.json).
MODELS: dict[str, ModelSpec] = {
    "llama-3.1-8b": ModelSpec("Llama 3.1 8B", 32, 8, 128, 2, 131_072),
    "llama-3.1-70b": ModelSpec("Llama 3.1 70B", 80, 8, 128, 2, 131_072),
    "mistral-7b": ModelSpec("Mistral 7B", 32, 8, 128, 2, 32_768),
    "qwen2.5-7b": ModelSpec("Qwen2.5 7B", 28, 4, 128, 2, 32_768),  # (the Instruct model's config.json)
}


def model_name(model: ModelSpec) -> str | None:
    """The MODELS key of ``model``, None for a model no key names (one a scenario file spells out)."""
    return next((k for k, m in MODELS.items() if m == model), None)


@dataclass(frozen=True)
class CostModel:
    """Duration of one engine step (docs/ENGINE.md#cost-model; defaults: a fit of vLLM serving Llama 3.1 8B on one
    H100).

    step_ms = step_base_ms + prefill_token_us * prefill tokens + decode_request_us * decoding requests
              + swap transfer time (blocks x (block bytes / bandwidth + per-block overhead))
    """

    step_base_ms: float = _help("fixed cost of a forward pass, ms", default=5.75)
    prefill_token_us: float = _help("cost per prefill (or recomputed) token, us", default=16.0)
    decode_request_us: float = _help("cost per decoding request in the batch, us", default=6.0)
    swap_bandwidth_gb_s: float = _help("GPU<->CPU copy bandwidth, GB/s (PCIe 5 practical)", default=50.0)
    swap_overhead_per_block_us: float = _help("fixed cost per copied block (a copy call), us", default=5.0)

    def __post_init__(self) -> None:
        # (a step of at least a microsecond and a link of at least 1 MB/s: figures stay finite and printable)
        check_float("step_base_ms", self.step_base_ms, 0.001, 60_000.0, within="cost")
        check_float("prefill_token_us", self.prefill_token_us, 0.0, 1_000_000.0, within="cost")
        check_float("decode_request_us", self.decode_request_us, 0.0, 1_000_000.0, within="cost")
        check_float("swap_bandwidth_gb_s", self.swap_bandwidth_gb_s, 0.001, 100_000.0, within="cost")
        check_float("swap_overhead_per_block_us", self.swap_overhead_per_block_us, 0.0, 1_000_000.0, within="cost")

    def step_ms(self, num_prefill_tokens: int, num_decode_reqs: int) -> float:
        return (
            self.step_base_ms
            + self.prefill_token_us * num_prefill_tokens / 1000.0
            + self.decode_request_us * num_decode_reqs / 1000.0
        )

    def swap_ms(self, num_blocks: int, block_bytes: int) -> float:
        """Time to copy ``num_blocks`` KV blocks one way; small blocks pay the per-block overhead more often: 125
        blocks of 2 MiB, 5.24 ms at 50 GB/s + 125 x 5 us = 5.87 ms. What the engine charges a swap-out or
        swap-in; ``swap_transfer_ms`` + ``swap_overhead_ms`` are its two parts (equal up to float rounding)."""
        per_block_ms = block_bytes / (self.swap_bandwidth_gb_s * 1e9) * 1e3 + self.swap_overhead_per_block_us / 1e3
        return num_blocks * per_block_ms

    # The parts of what a preemption costs, for showing it (the engine charges recompute through step_ms and swap
    # through swap_ms). NOTE: the formulas are written as the lesson first wrote them, so the page's numbers stay.
    def recompute_ms(self, num_tokens: int) -> float:
        """GPU time to prefill ``num_tokens`` again after a recompute preemption: the prefill term of ``step_ms``
        (2,000 tokens x 16 us = 32 ms); the steps' fixed cost is not counted, the re-prefill shares those steps."""
        return num_tokens * self.prefill_token_us / 1e3

    @staticmethod
    def swap_bytes(num_blocks: int, block_bytes: int) -> int:
        """Bytes a swap copies each way, and parks in CPU memory meanwhile: whole blocks (125 x 2 MiB = 262 MB for a
        2,000-token victim of Llama 3.1 8B in 16-token blocks)."""
        return num_blocks * block_bytes

    def swap_transfer_ms(self, num_bytes: int) -> float:
        """Time to move ``num_bytes`` one way at the peak bandwidth, without the per-block overhead:
        262,144,000 B at 50 GB/s = 5.24 ms."""
        return num_bytes / (self.swap_bandwidth_gb_s * 1e9) * 1e3

    def swap_overhead_ms(self, num_blocks: int) -> float:
        """The per-block copy overhead of moving ``num_blocks`` one way: 125 x 5 us = 0.625 ms."""
        return num_blocks * self.swap_overhead_per_block_us / 1e3


@dataclass(frozen=True)
class EngineConfig:
    """One serving engine. Defaults reproduce vLLM V1's scheduler (FCFS, recompute, chunked prefill), except prefix
    caching: V1 turns it on, the lab starts with it off so that each lesson shows one mechanism at a time."""

    num_blocks: int = _help("usable GPU KV blocks in the pool (vLLM reserves one more)", default=1000)
    block_size: int = _help("tokens per KV block", default=16)
    max_num_seqs: int = _help("most requests running at once (batch slots)", default=256)
    max_num_batched_tokens: int = _help("token budget of one step", default=2048)
    max_model_len: int = _help("longest sequence, prompt + output tokens: a request stops there, a longer prompt is "
                               "rejected (0 = vLLM's default: the model's context length, at most "
                               "max_num_batched_tokens without chunked prefill)", default=0)
    policy: Policy | str = _help("waiting-queue order: a Policy, or the name of a record registered in "
                                 "sim.policies.POLICIES", default=Policy.FCFS)
    enable_prefix_caching: bool = _help("reuse full KV blocks with the same token prefix (on in vLLM V1)",
                                        default=False)
    chunked_prefill: bool = _help("split long prompts over several steps", default=True)
    watermark: float = _help("fraction of the KV pool kept free when admitting a request while others run "
                             "(0 = none, vLLM's default)", default=0.0)
    preemption_mode: PreemptionMode = _help("what happens to a victim's KV", default=PreemptionMode.RECOMPUTE)
    num_cpu_blocks: int = _help("CPU swap space, blocks (swap mode)", default=0)
    abort_on_disconnect: bool = _help("abort a request when its client disconnects", default=True)
    disconnect_detect_delay_steps: int = _help("steps before the server notices a disconnect", default=0)
    timeout_steps: int = _help("client gives up this many steps after sending (0 = never)", default=0)
    stop_check: StopCheck = _help("when the server checks for the end of an answer", default=StopCheck.EVERY_STEP)
    prediction_error_sigma: float = _help("sigma of the lognormal length-prediction error", default=0.5)
    starvation_threshold_steps: int = _help("promote a request waiting this long (0 = no guard)", default=0)
    priority_quantum_steps: int = _help("steps a promoted request keeps its promotion", default=50)
    input_weight: float = _help("VTC charge per prompt token", default=1.0)
    output_weight: float = _help("VTC charge per generated token", default=2.0)
    client_weights: tuple[tuple[str, float], ...] = _help("VTC share weights per client", default=())
    rate_limit_max_requests: int = _help("accepted requests per client per window (0 = no limit)", default=0)
    rate_limit_window_steps: int = _help("rate-limit window, steps", default=1000)
    max_num_queued_reqs: int | None = _help("refuse an arrival when unfinished requests (waiting + running) plus it "
                                            "would pass this (None = no cap, vLLM's default)", default=None)
    max_num_queued_tokens: int | None = _help("refuse an arrival while the prompts of requests still in prefill add "
                                              "up to this many tokens or more (None = no cap, vLLM's default)",
                                              default=None)
    ttft_slo_ms: float = _help("time-to-first-token target, ms (0 = none)", default=0.0)
    tbt_slo_ms: float = _help("target for every gap between two tokens of a request, ms (0 = none)", default=0.0)
    shed_past_ttft_slo: bool = _help("drop a waiting request whose TTFT target has passed (with ttft_slo_ms 0 "
                                     "there is no target to pass)", default=False)
    seed: int = _help("seed for the length-prediction error", default=0)
    model: ModelSpec = _help("model whose KV footprint sizes the blocks", default_factory=ModelSpec)
    cost: CostModel = _help("step duration model", default_factory=CostModel)
    max_steps: int = _help("guard: stop a run that has not finished after this many steps", default=2_000_000)

    def __post_init__(self) -> None:
        check_int("num_blocks", self.num_blocks, 1, 10_000_000)
        check_int("block_size", self.block_size, 1, 1024)
        check_int("max_num_seqs", self.max_num_seqs, 1, 4096)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, 1_000_000)
        object.__setattr__(self, "policy", policy_name(self.policy))
        object.__setattr__(
            self, "preemption_mode", choice(PreemptionMode, self.preemption_mode, "preemption_mode")
        )
        object.__setattr__(self, "stop_check", choice(StopCheck, self.stop_check, "stop_check"))
        for name in ("enable_prefix_caching", "chunked_prefill", "abort_on_disconnect", "shed_past_ttft_slo"):
            if not isinstance(getattr(self, name), bool):
                raise FieldError(name, f"must be true or false, got {getattr(self, name)!r}", value=getattr(self, name))
        # (vLLM's range, [0, 1): near 1 nothing is admitted while anything runs, which the runs then show)
        check_float("watermark", self.watermark, 0.0, 1.0, hi_open=True)
        check_int("num_cpu_blocks", self.num_cpu_blocks, 0, MAX_CPU_BLOCKS)
        check_int("disconnect_detect_delay_steps", self.disconnect_detect_delay_steps, 0)
        check_int("timeout_steps", self.timeout_steps, 0)
        check_float("prediction_error_sigma", self.prediction_error_sigma, 0.0, 5.0)
        check_int("starvation_threshold_steps", self.starvation_threshold_steps, 0)
        check_int("priority_quantum_steps", self.priority_quantum_steps, 1)
        check_float("input_weight", self.input_weight, 0.0, 1000.0)
        check_float("output_weight", self.output_weight, 0.0, 1000.0)
        if self.input_weight == 0 and self.output_weight == 0:
            raise FieldError("input_weight, output_weight", "at least one must be > 0", value=0)
        object.__setattr__(self, "client_weights", _normalise_client_weights(self.client_weights))
        check_int("rate_limit_max_requests", self.rate_limit_max_requests, 0)
        check_int("rate_limit_window_steps", self.rate_limit_window_steps, 1)
        for name in ("max_num_queued_reqs", "max_num_queued_tokens"):  # (vLLM: int | None, ge=0)
            _check_cap(name, getattr(self, name))
        for name in ("ttft_slo_ms", "tbt_slo_ms"):
            check_float(name, getattr(self, name), 0.0, MAX_SLO_MS)
        check_int("seed", self.seed, 0)
        check_int("max_steps", self.max_steps, 1, 10_000_000)  # (a trace keeps ~200 bytes a step: 2 GB at most)
        if not isinstance(self.model, ModelSpec):
            raise FieldError("model", f"must be a ModelSpec, got {self.model!r}", value=self.model)
        if not isinstance(self.cost, CostModel):
            raise FieldError("cost", f"must be a CostModel, got {self.cost!r}", value=self.cost)
        self._check_max_model_len()

    def _check_max_model_len(self) -> None:
        """vLLM's start-up checks: max_model_len within the model's context and, without chunked prefill, within
        one step's budget (so that every prompt, and every preempted request's re-prefill, fits one step)."""
        check_int("max_model_len", self.max_model_len, 0, 10_000_000)
        context = self.model.max_position_embeddings
        if self.max_model_len > context:
            raise FieldError("max_model_len", f"must be at most {context:,}, the context length of {self.model.name} "
                             f"(model.max_position_embeddings), got {self.max_model_len:,}; 0 = that default",
                             value=self.max_model_len, lo=0, hi=context)
        if not self.chunked_prefill and self.max_model_len > self.max_num_batched_tokens:
            raise FieldError("max_model_len", f"must be at most max_num_batched_tokens "
                             f"({self.max_num_batched_tokens:,}) when chunked_prefill is off, got "
                             f"{self.max_model_len:,}; 0 = the longest allowed",
                             value=self.max_model_len, lo=0, hi=self.max_num_batched_tokens)

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.model.kv_bytes_per_token

    @property
    def effective_max_model_len(self) -> int:
        """``max_model_len``, or when it is 0 vLLM's default: the model's context length.
        NOTE: vLLM refuses to start when that default exceeds max_num_batched_tokens without chunked prefill (you
        must set max_model_len); the lab takes the longest value vLLM would accept, the budget."""
        if self.max_model_len:
            return self.max_model_len
        context = self.model.max_position_embeddings
        return context if self.chunked_prefill else min(context, self.max_num_batched_tokens)

    @property
    def watermark_blocks(self) -> int:
        """Free blocks an admission must leave while something runs: vLLM's ``int(watermark * num_blocks)`` over its
        whole pool, which counts the reserved null block too (``num_blocks + 1`` here)."""
        return int(self.watermark * (self.num_blocks + 1))

    def client_weight(self, client_id: str) -> float:
        """The client's VTC weight (1 unless ``client_weights`` names it)."""
        return self._weight_of.get(client_id, 1.0)

    @functools.cached_property
    def _weight_of(self) -> dict[str, float]:
        # (built once: a dict per call made a run with thousands of clients quadratic)
        return dict(self.client_weights)

    def replace(self, **changes: Any) -> EngineConfig:
        return dataclasses.replace(self, **changes)


def _check_cap(name: str, value: Any) -> None:
    """An admission cap: null (no cap) or a whole number from 0 (vLLM's ``int | None``, ``ge=0``; 0 refuses every
    request)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FieldError(name, f"must be a whole number >= 0, or null for no cap, got {value!r}", value=value, lo=0)
    check_int(name, value, 0)


def _normalise_client_weights(value: Any) -> tuple[tuple[str, float], ...]:
    """Accept a mapping or pairs; return sorted ``(client_id, weight)`` pairs (hashable for caching)."""
    items = value.items() if isinstance(value, dict) else value
    try:
        pairs = [(k, v) for k, v in items]
    except (TypeError, ValueError):
        raise FieldError("client_weights", f"must map client ids to weights, got {value!r}", value=value) from None
    for client_id, weight in pairs:
        if not isinstance(client_id, str) or not client_id:
            raise FieldError("client_weights", f"client ids must be non-empty strings, got {client_id!r}",
                             value=client_id)
        check_float(f"client_weights[{client_id}]", weight, 0.001, 1000.0)
    seen: set[str] = set()
    twice = next((c for c, _ in pairs if c in seen or seen.add(c)), None)  # (set.add returns None)
    if twice is not None:
        raise FieldError("client_weights", f"client {twice!r} is given two weights; give each client one",
                         item=twice)
    return tuple(sorted((k, float(v)) for k, v in pairs))


def field_help(cls: type, name: str) -> str:
    """The help text (with unit) of a config field, for tooltips."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}[name]


GIB = 1024**3


def cdiv(a, b):
    """Ceiling division of whole numbers, or of int arrays element-wise: ``cdiv(17, 16) == 2`` (blocks for 17
    tokens of 16 per block)."""
    return -(-a // b)


def num_blocks_for_gib(pool_gib: float, model: ModelSpec, block_size: int) -> int:
    """How many whole blocks of ``block_size`` tokens fit in ``pool_gib`` GiB of KV memory."""
    check_float("pool_gib", pool_gib, 0.0, lo_open=True)
    return int(pool_gib * GIB // (model.kv_bytes_per_token * block_size))


def gib_for_blocks(num_blocks: int, model: ModelSpec, block_size: int) -> float:
    return num_blocks * block_size * model.kv_bytes_per_token / GIB
