"""What the machine allows this process: the memory it may still use. (Floor 0: read by the kernels and the
results alike, below both.)"""

from __future__ import annotations

from pathlib import Path


def available_memory_bytes() -> int | None:
    """Memory this process may still use, bytes: the lowest of Linux's MemAvailable and the cgroup limit minus
    its usage; ``None`` where neither can be read (then no run is refused up front)."""
    limits: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit, usage = Path(limit_file).read_text().strip(), Path(usage_file).read_text().strip()
            if limit != "max" and int(limit) < 2**60:
                limits.append(max(0, int(limit) - int(usage)))
        except (OSError, ValueError):
            continue
    return min(limits) if limits else None


__all__ = ["available_memory_bytes"]
