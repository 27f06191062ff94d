"""What a scenario gets from the runner: where to put plots and raw series, and a logger."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Context:
    mode: str  # "quick" or "full"
    plots_dir: Path
    raw: dict[str, Any] = field(default_factory=dict)  # series kept in the run file, not in latest.json
    plots: list[Path] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def log(self, msg: str) -> None:
        print(
            f"[bench {time.monotonic() - self.started:6.1f}s] {msg}",
            file=sys.stderr,
            flush=True,
        )

    def plot_path(self, name: str) -> Path:
        path = self.plots_dir / f"{name}.png"
        self.plots.append(path)
        return path
