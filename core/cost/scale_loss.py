"""Losses that grow with the cluster, beyond what each collective's own cost already charges: the slowest GPU of
a synchronous job sets its pace (this module), and collectives across many servers run below the per-NIC rate
(core.cost.collective.Fabric.loss_per_doubling, the `ring_loss` assumption).

Identical GPUs do not run at the same speed: Sinha et al. (SC'22, arXiv 2208.11035) measured an 8 % average
performance variation (up to 22 %) across the GPUs of four production clusters, outliers 1.5x slower than the
median. A training step waits for its slowest GPU at every synchronisation, so with per-GPU speeds spread normally
around the median with a relative standard deviation sigma, G GPUs run at the pace of the expected slowest,
about sigma x sqrt(2 ln G) behind the median (the extreme of G normal draws). The per-operation rates are fitted
on runs of one server and up; this charges the spread beyond one server's GPUs:

    share = sigma x (sqrt(2 ln G) - sqrt(2 ln gpus_per_node)), at least 0

and the step's pipeline time (compute, exposed TP and PP communication, bubble) grows by that share.
"""

from __future__ import annotations

import numpy as np


def slowest_share(gpus, gpus_per_node, sigma: float) -> np.ndarray:
    """Share by which the slowest of `gpus` GPUs lags the median, beyond one server's (0 at one server)."""
    g = np.maximum(np.asarray(gpus, dtype=float), 1.0)
    n = max(float(gpus_per_node), 1.0)
    spread = np.sqrt(2.0 * np.log(g)) - np.sqrt(2.0 * np.log(n))
    return sigma * np.maximum(spread, 0.0)
