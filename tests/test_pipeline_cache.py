"""The engine's caches are bounded by operations held, whatever mix of sizes comes through."""

from core.pipeline.ops_cache import OpsBoundedCache
from core.pipeline.result import CACHE_BUDGET_OPS, PipelineParams, _results, _structures, simulate


def test_a_hit_returns_the_same_result():
    a = simulate(PipelineParams(schedule="zb-h1", p=4, m=9))
    assert simulate(PipelineParams(schedule="zb-h1", p=4, m=9)) is a


def test_budget_holds_for_big_and_small_entries():
    for m in range(256, 1025, 256):  # four large timelines (64 x m x 2 ops each)
        simulate(PipelineParams(schedule="1f1b", p=64, m=m))
    for m in range(1, 200):  # and many small ones
        simulate(PipelineParams(schedule="gpipe", p=2, m=m))
    assert _results.held_ops <= CACHE_BUDGET_OPS
    assert _structures.held_ops <= CACHE_BUDGET_OPS
    assert len(_results) > 100  # small entries are not evicted by a count limit


def test_lru_order_and_single_oversized_entry():
    cache = OpsBoundedCache(10, size_of=len)
    cache.get_or_make("a", lambda: "xxxx")
    cache.get_or_make("b", lambda: "xxxx")
    cache.get_or_make("a", lambda: "never built")  # a hit refreshes "a"
    cache.get_or_make("c", lambda: "xxxx")  # 12 > 10: the least recently used ("b") goes
    assert cache.get_or_make("b", lambda: "rebuilt") == "rebuilt"
    big = OpsBoundedCache(10, size_of=len)
    assert big.get_or_make("huge", lambda: "x" * 50) == "x" * 50  # kept alone rather than refused
    assert len(big) == 1
