"""What the run was measured on: CPU, memory, kernel, commit, tool versions."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

from bench.procs import REPO


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unavailable"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def congestion_controls() -> list[str]:
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def info() -> dict[str, Any]:
    import matplotlib

    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "mem_total_bytes": mem_total_bytes(),
        "kernel": platform.release(),
        "os": _first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "git_commit": _first_line(["git", "-C", str(REPO), "rev-parse", "HEAD"]),
        "git_dirty": _first_line(["git", "-C", str(REPO), "status", "--porcelain", "--", "lab", "gateway"])
        != "unavailable",
        "tools": {
            "python": platform.python_version(),
            "matplotlib": matplotlib.__version__,
            "iproute2": _first_line(["ip", "-V"]),
            "perigee": _first_line([str(REPO / "bin/perigee"), "--version"]),
        },
        "tcp_congestion_controls": congestion_controls(),
    }
