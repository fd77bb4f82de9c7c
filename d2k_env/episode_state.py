"""EpisodeState: an episode as data, small, JSON as it is, and enough to rebuild it.

It holds the configuration, the reset seed, the step count, whether the episode ended, the action
log (:mod:`d2k_env.action_log`: one entry per step, long strings in ``blobs``, each once and most as
a delta of the one before) and the workspace's files. A file whose content is a blob is written
``{"blob": key}`` rather than again. :meth:`EpisodeState.to_json` and :meth:`EpisodeState.from_json`
convert to and from plain JSON data; ``from_json`` checks the shape (a ValueError says what is
wrong), :func:`d2k_env.env.replay` also that the task is a registered one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from d2k_env.action_log import ActionLog
from d2k_env.blob_store import BlobStore


@dataclass(frozen=True)
class EpisodeState:
    task_id: str
    backend: str
    guidance: tuple[str, ...]
    reward: str
    max_steps: int
    seed: int | None
    steps: int
    terminated: bool
    actions: list[dict[str, Any]]
    blobs: dict[str, dict[str, Any]]
    files: dict[str, Any]  # path -> the content, or {"blob": key} when the content is a blob
    mode: str = "solution"  # "design": a design-only episode (absent from states written before modes)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (a new dict; lists and dicts in it are the state's own)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["guidance"] = list(self.guidance)
        return data

    @classmethod
    def from_json(cls, data: Any) -> "EpisodeState":
        """The state ``data`` (as :meth:`to_json` writes it) describes; a ValueError when it is not
        shaped like one. The action log and blob table are checked in full."""
        if isinstance(data, EpisodeState):
            return data
        if not isinstance(data, dict):
            raise ValueError(f"a state is an EpisodeState or its JSON, not a {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in data and name != "mode"]
        if missing:
            raise ValueError(f"the state lacks {', '.join(missing)}")
        if not isinstance(data["task_id"], str):
            raise ValueError(f"the state's task id {repr(data['task_id'])[:100]} is not a string naming one of the "
                             "registered tasks")
        data = {"mode": "solution", **data}
        types = {"backend": str, "reward": str, "max_steps": int, "steps": int,
                 "terminated": bool, "actions": list, "blobs": dict, "files": dict, "mode": str}
        wrong = [name for name, kind in types.items() if not isinstance(data[name], kind)]
        if data["seed"] is not None and not isinstance(data["seed"], int):
            wrong.append("seed")
        if not isinstance(data["guidance"], (list, tuple)) or not all(isinstance(g, str) for g in data["guidance"]):
            wrong.append("guidance")
        if wrong:
            raise ValueError(f"the state's {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not of the "
                             "type KernelEnv.state() writes")
        log = ActionLog.restore(data["actions"], data["blobs"])
        for path, content in data["files"].items():
            blob = content.get("blob") if isinstance(content, dict) else None
            if not isinstance(path, str) or not (isinstance(content, str) or (
                    isinstance(content, dict) and content.keys() == {"blob"} and blob in log.blobs)):
                raise ValueError(f"the state's file {repr(path)[:100]} is neither text nor a blob of the state")
        return cls(**{**{name: data[name] for name in names}, "guidance": tuple(data["guidance"])})

    def file_texts(self) -> dict[str, str]:
        """The workspace's files, every content as text."""
        blobs = BlobStore.from_table(self.blobs)
        return {path: blobs.get(content["blob"]) if isinstance(content, dict) else content
                for path, content in self.files.items()}
