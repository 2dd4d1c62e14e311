"""Scheduler Lab's simulator: a step-level model of an LLM serving engine's scheduler (vLLM V1 compatible).

Pure Python + numpy: importing ``sim`` never imports streamlit, plotly or pandas.

    from sim import EngineConfig, RequestSpec, simulate
    trace = simulate(EngineConfig(num_blocks=999, max_num_seqs=1), [RequestSpec("a", 0, 4, 100)])
"""

from .config import MODELS, CostModel, EngineConfig, ModelSpec, Policy, PreemptionMode, StopCheck
from .engine import Engine, SimulationError, StepLimitError, simulate
from .events import Event, EventKind, FinishReason, PreemptReason, RejectReason, WaitReason
from .request import RequestSpec, RequestStatus
from .scenario import Scenario, ScenarioError
from .trace import Trace
from .workload import ClientSpec, WorkloadSpec

__all__ = [
    "MODELS", "ClientSpec", "CostModel", "Engine", "EngineConfig", "Event", "EventKind", "FinishReason", "ModelSpec",
    "Policy", "PreemptReason", "PreemptionMode", "RejectReason", "RequestSpec", "RequestStatus", "Scenario",
    "ScenarioError", "SimulationError", "StepLimitError", "StopCheck", "Trace", "WaitReason", "WorkloadSpec",
    "simulate",
]
