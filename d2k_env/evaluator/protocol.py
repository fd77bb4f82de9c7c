"""Messages between the env and the evaluation worker (plain dataclasses, JSON on the wire)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["test", "benchmark", "submit", "profile"]
Role = Literal["solution", "replay", "check"]


@dataclass
class EvalRequest:
    """One evaluation of a solution file, or the check of its saved outputs.

    ``role="solution"`` runs the solution and saves what it launches (its recordings) under
    ``outputs_dir``; ``role="replay"`` (never imports the solution) replays the recordings there on
    the checked inputs, saves the outputs and times; ``role="check"`` (likewise) computes the expected
    outputs and compares. For the replay and the check ``seed`` is the evaluation's *inputs key*,
    derived by the env from its secret seed (:func:`inputs_key`): every checked or timed input is
    drawn from it; the solution gets a recording key instead, from which no checked input can be
    drawn (the secret seed itself, which also draws the held-out shapes, never leaves the env). ``nonce`` never
    reaches a worker: the supervisor keeps it and stamps the worker's messages with it.
    """

    task_id: str
    root: str
    solution_path: str
    mode: Mode
    device: Literal["cuda", "cpu"]
    workloads: list[str]
    smoke: bool
    seed: int
    time_budget_s: float = 3.0
    ceilings: dict[str, float] | None = None
    role: Role = "solution"
    outputs_dir: str = ""
    solution_source: str | None = None  # the text the policy checked, which the worker runs (None: the file)
    heldout: list[dict] = field(default_factory=list)  # held-out shapes: name and params, untimed
    nonce: str = ""  # the env's: every message on the result channel must carry it (see reaper)
    memcheck: bool = False  # a run under the GPU memory checker (held-out shapes of a submit): no profiler

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "EvalRequest":
        return cls(**json.loads(text))


def derive_seed(secret: int, *parts: object) -> int:
    """A 63-bit seed from the secret and a purpose (workload, role, index; held-out shapes)."""
    text = ":".join(str(p) for p in (secret, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def inputs_key(secret: int) -> int:
    """What a worker gets of the secret seed: enough to draw the evaluation's inputs, nothing more."""
    return derive_seed(secret, "inputs")


@dataclass
class WorkloadResult:
    """Correctness and (when timed) speed of the solution on one workload."""

    name: str
    correct: bool
    message: str
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    solution_ms: float | None = None
    baseline_ms: float | None = None
    solution_spread: float | None = None  # interquartile range / median
    baseline_spread: float | None = None
    repetitions: int | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None  # 95% bootstrap interval of the median ratio
    roofline_ms: float | None = None
    roofline_fraction: float | None = None
    graph_solution_ms: float | None = None  # per call, replayed in a CUDA graph (launch-bound workloads)
    graph_baseline_ms: float | None = None
    heldout: bool = False  # a held-out shape of a submission: checked, never timed
    allocated_bytes: int | None = None  # what forward allocates (its recorded buffers), on any device
    peak_bytes: int | None = None  # on the GPU: the replay's peak device memory above its inputs
    baseline_note: str | None = None  # the evaluator's: why the baseline was re-measured, and what came of it
    # The replay's findings on the task's automatically checked design properties: id -> {"status",
    # "detail"} (d2k_env.tasks.properties). Reported beside the verdict, never paid.
    properties: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class EvalResult:
    """Outcome of one evaluation. ``error`` is set when the solution never got to run every workload."""

    mode: str
    backend: str
    workloads: list[WorkloadResult] = field(default_factory=list)
    error: str | None = None
    timed: bool = False
    device_name: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    ceilings: dict[str, float] | None = None
    profile: list[dict[str, Any]] | None = None
    output: str = ""  # what the solution printed (clipped)
    sandbox: dict[str, str] = field(default_factory=dict)  # each isolation layer and its state, by name
    queue: dict[str, Any] = field(default_factory=dict)  # where and how long a service's job waited
    # The GPU leases its phases held (see gpu_lease): phase, gpu, exclusive, waited_s, held_s each.
    lease: list[dict[str, Any]] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.error is None and bool(self.workloads) and all(w.correct for w in self.workloads)

    @property
    def speedups(self) -> list[float]:
        return [w.speedup for w in self.workloads if w.speedup is not None]

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        """Each automatically checked design property over the workloads that carry its finding:
        ``status`` "not realised" where any workload's is, "realised" where every checked one's is,
        else "unchecked"; ``detail`` one line saying where and what was seen; ``workloads`` the
        workloads' names by status. Workloads that never reached the replay carry no findings."""
        by_id: dict[str, dict[str, list]] = {}
        for w in self.workloads:
            for pid, found in w.properties.items():
                by_id.setdefault(pid, {s: [] for s in ("realised", "not realised", "unchecked")})
                by_id[pid][found["status"]].append((w.name, found["detail"]))
        summary = {}
        for pid, seen in by_id.items():
            names = {status: [name for name, _ in pairs] for status, pairs in seen.items()}
            unchecked = f"; unchecked on {', '.join(names['unchecked'])}" if names["unchecked"] else ""
            if seen["not realised"]:
                name, detail = seen["not realised"][0]
                status = "not realised"
                text = f"not realised on {', '.join(names['not realised'])} ({name}: {detail})"
            elif seen["realised"]:
                status = "realised"
                text = f"realised on all {len(names['realised'])} checked workload(s) ({seen['realised'][0][1]})" \
                       f"{unchecked}"
            else:
                status, text = "unchecked", seen["unchecked"][0][1]
            summary[pid] = {"status": status, "detail": text, "workloads": names}
        return summary

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["correct"] = self.correct
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        d = {k: v for k, v in d.items() if k != "correct"}
        d["workloads"] = [WorkloadResult(**w) for w in d.get("workloads", [])]
        for w in d["workloads"]:
            if w.speedup_ci is not None:
                w.speedup_ci = tuple(w.speedup_ci)
        return cls(**d)
