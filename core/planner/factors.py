"""Divisors of a GPU count or an expert count: every split the planner enumerates is one of them."""

from __future__ import annotations

import math


def divisors(n: int) -> list[int]:
    """All k with n % k == 0, ascending (pairs up to sqrt(n): G = 16,384 takes 128 trial divisions, not 16,384)."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))
