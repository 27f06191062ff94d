"""Running system programs with argument lists (never shell strings), inside or outside a namespace."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


class CommandError(RuntimeError):
    pass


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=input_text)
    if check and proc.returncode != 0:
        raise CommandError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def in_ns(ns: str, argv: Sequence[str]) -> list[str]:
    """argv to run a program inside network namespace ns."""
    return ["ip", "netns", "exec", ns, *argv]


def run_ns(ns: str, argv: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return run(in_ns(ns, argv), **kw)  # type: ignore[arg-type]


def ip(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`ip -n ns ...`: iproute2 switches namespace itself, no exec needed."""
    return run(["ip", "-n", ns, *args], check=check)


def list_namespaces() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]
