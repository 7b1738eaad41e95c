"""The bytes autograd keeps for a backward, counted once per storage (the engine tests' one way of counting).

Each tensor a forward saves is referenced weakly and counted if it is still held when the forward ends: a tensor
saved by a node the forward then drops is freed, and counting storages by address as they are saved would let a
later tensor at a reused address go uncounted.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any


def kept_bytes(torch, forward: Callable[[], Any], skip: set[int]) -> tuple[int, Any]:
    """(bytes of the storages `forward()` leaves saved for the backward, `skip` data pointers left out; its output)."""
    saved = []

    def pack(t):
        saved.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in (r() for r in saved)
            if t is not None}
    return sum(n for ptr, n in held.items() if ptr not in skip), out
