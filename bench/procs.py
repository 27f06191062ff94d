"""Running measurement tools inside namespaces, with timeouts and guaranteed cleanup."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


class ToolError(RuntimeError):
    pass


def in_netns(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def tool_argv(module: str, *args: str) -> list[str]:
    return [PYTHON, "-m", module, *args]


def run(argv: list[str], timeout: float, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"timed out after {timeout}s: {' '.join(argv)}") from exc
    if check and proc.returncode != 0:
        raise ToolError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc


class Background:
    """A tool started in the background; always stopped by `close` (use as a context manager)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            start_new_session=True,
        )

    def wait_line(self, expected: str, timeout: float) -> None:
        """Block until the tool prints `expected` on stdout (its readiness signal)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != expected:
            self.close()
            raise ToolError(f"{' '.join(self.argv)} not ready: {line!r} {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()[-2000:]

    def result(self, timeout: float) -> Any:
        """Wait for exit and parse the JSON object the tool prints last."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.close()
            raise ToolError(f"timed out after {timeout}s: {' '.join(self.argv)}") from exc
        lines = [ln for ln in out.splitlines() if ln.strip()]
        if not lines:
            raise ToolError(f"{' '.join(self.argv)} printed nothing; stderr: {err.strip()[-2000:]}")
        return json.loads(lines[-1])

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=3)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
