"""A least-recently-used cache bounded by the number of pipeline operations it holds.

Entries differ in size by five orders of magnitude (a p=4, m=8 timeline has 64 ops, the largest
allowed one has 2^20), so a count-based bound is either useless for small entries or dangerous for
big ones (about 170 bytes per op are kept). Thread-safe: Streamlit serves sessions from threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class OpsBoundedCache(Generic[V]):
    def __init__(self, budget_ops: int, size_of: Callable[[V], int]):
        self.budget = budget_ops
        self.size_of = size_of
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
        value = make()  # outside the lock: a slow build must not block other sessions' hits
        size = self.size_of(value)
        with self._lock:
            if key not in self._items:
                self._items[key] = (value, size)
                self._held += size
            while self._held > self.budget and len(self._items) > 1:
                _, (_, dropped) = self._items.popitem(last=False)
                self._held -= dropped
        return value

    @property
    def held_ops(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0
