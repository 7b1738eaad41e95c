"""Process memory setting for the dashboard, the CLI and the benchmarks (not used by core's logic).

A cold simulation of a large schedule allocates tens of MB of short-lived numpy arrays. glibc's
default returns such blocks to the kernel when they are freed, so the next simulation takes a page
fault for every 4 KiB it touches again: on the 2-core development VM that doubled the time of a
131,072-op simulation (22 ms -> 12 ms with this setting). Keeping freed memory in the process (up to
`limit` per block, and not trimming the heap below it) removes that tax; the process keeps its
high-water mark instead, which the cache bounds keep small. A no-op where glibc is not the allocator.

`release_freed_memory` gives that kept memory back (glibc's malloc_trim over every arena): the dashboard's work
limiter (ui/shared/work_limit.py) calls it once heavy work is done and when the server falls idle, so a server a class
has left holds its caches, not the high-water mark of the largest question it was asked.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
DEFAULT_LIMIT = 256 * 1024 * 1024


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def keep_freed_memory(limit: int = DEFAULT_LIMIT) -> bool:
    """Ask glibc to keep freed blocks up to `limit` bytes for reuse. True when the setting took."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, limit)) and bool(mallopt(M_TRIM_THRESHOLD, limit))


def release_freed_memory() -> bool:
    """Return the freed memory glibc keeps to the system (malloc_trim(0): every arena, pages inside the heap too).
    True when something was released; False where glibc is not the allocator or nothing was free."""
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False
