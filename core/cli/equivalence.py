"""`python -m core equivalence`: replicated Adam against ZeRO-1/2-style sharded Adam, bit for bit."""

from __future__ import annotations

import argparse

from core.cli import spec_args
from core.cli.text import print_json
from core.memory.equivalence import demonstrate
from core.params.memory import EQUIVALENCE


def build(parser: argparse.ArgumentParser) -> None:
    for spec in EQUIVALENCE.values():
        spec_args.add(parser, spec)
    spec_args.switch(parser, "--json", help="Print the result as JSON.")


def run(args: argparse.Namespace) -> int:
    v = spec_args.collect(args, EQUIVALENCE)
    r = demonstrate(v["ranks"], v["steps"], v["size"], v["seed"], v["clip"])
    if args.json:
        print_json(r.as_dict())
        return 0
    shards = sorted(set(r.state_per_rank_sharded))
    print(f"Adam on {r.size:,} parameters, {r.ranks} data-parallel ranks, {r.steps} steps, a different gradient "
          "per rank.")
    print(f"  max |sharded - replicated|                        {r.max_abs_diff:.3e}")
    print(f"  with global-norm clipping (clip {v['clip']:g}, active on {r.clipped_steps} steps),")
    print(f"    same reduction order (+{r.extra_scalar_allreduces} scalar all-reduces)  {r.max_abs_diff_clipped:.3e}")
    print(f"    replicated side summing the squares in one go   {r.max_abs_diff_clipped_one_sum:.3e}")
    print(f"  plain DP: all ranks identical                     {r.replicas_identical}")
    print(f"  sharded: all ranks identical                      {r.sharded_identical}")
    print(f"  Adam moments per rank: replicated {r.state_per_rank_replicated:,} numbers, sharded "
          f"{' / '.join(f'{s:,}' for s in shards)} numbers")
    print(f"  mean |theta - target|, start -> end               {r.error_start:.3f} -> {r.error_end:.3f}")
    print(f"  loss {r.loss_start:.4f} -> {r.loss_end:.4f}")
    return 0
