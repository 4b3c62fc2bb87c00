"""Bootstrap confidence intervals of a mean: over single values (:func:`bootstrap_ci`) or over clusters of
them, say the questions of one video (:func:`cluster_bootstrap_ci`). Both are seeded and independent of row
order, so two users get the same interval from the same rows."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["bootstrap_ci", "cluster_bootstrap_ci"]


def _interval(
    samples: tuple[np.ndarray, ...], statistic: Callable[..., Any], n_boot: int, seed: int, level: float
) -> tuple[float, float, str]:
    """(lo, hi, method) from :func:`scipy.stats.bootstrap`: BCa, or the percentile interval when BCa cannot be
    computed (a skewed tiny sample). Several samples are resampled together (paired)."""
    from scipy import stats

    size = len(samples[0])
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BCa's own warning: the fallback below handles it
            res = stats.bootstrap(
                samples, statistic, paired=len(samples) > 1, vectorized=True, n_resamples=int(n_boot),
                method=method, confidence_level=level, batch=max(1, 2_000_000 // size),
                rng=np.random.default_rng(seed),
            )  # fmt: skip
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            break
    return lo, hi, method


def bootstrap_ci(
    values: list[float] | np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Mean and bootstrap interval (BCa, :func:`scipy.stats.bootstrap`) of ``values``.

    The interval depends on the values in the order given and on ``seed`` only, so callers pass
    values sorted by task id (:func:`omniagent.eval.summary.summarize` does): then any row order gives the
    same interval. A sample whose values are all equal has the degenerate interval [mean, mean]; when BCa
    cannot be computed (a skewed tiny sample) the percentile interval is used and named in ``method``.
    """
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    mean = float(x.mean())
    if n == 1 or n_boot <= 0 or float(np.ptp(x)) == 0.0:
        return {"mean": mean, "lo": mean, "hi": mean, "n": n}
    lo, hi, method = _interval((x,), np.mean, n_boot, seed, level)
    return {"mean": mean, "lo": lo, "hi": hi, "n": n, "method": method}


def _ratio(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    return sums.sum(axis=axis) / counts.sum(axis=axis)


def cluster_bootstrap_ci(
    values: list[float] | np.ndarray,
    clusters: list[str],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean of ``values`` and a bootstrap interval that resamples whole clusters (say, videos).

    Why: the questions of one video share its difficulty, so they are not independent draws; resampling
    questions one by one then gives too narrow an interval. Each resample draws clusters with replacement
    and takes the mean over all their values (sum over sum of counts, so big clusters weigh by their
    size, as in the plain mean). Clusters are sorted by key, so any row order gives the same interval.
    Fewer than two clusters (or equal cluster means) give the degenerate interval [mean, mean].
    """
    x = np.asarray(values, dtype=float)
    if x.size != len(clusters):
        raise ValueError(f"{x.size} values but {len(clusters)} cluster keys")
    if x.size == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0, "clusters": 0}
    keys = sorted(set(clusters))
    index = {k: i for i, k in enumerate(keys)}
    where = np.array([index[c] for c in clusters])
    sums = np.bincount(where, weights=x, minlength=len(keys))
    counts = np.bincount(where, minlength=len(keys)).astype(float)
    mean = float(x.mean())
    out: dict[str, Any] = {"mean": mean, "lo": mean, "hi": mean, "n": int(x.size), "clusters": len(keys)}
    if len(keys) < 2 or n_boot <= 0 or float(np.ptp(sums / counts)) == 0.0:
        return out
    lo, hi, method = _interval((sums, counts), _ratio, n_boot, seed, level)
    return out | {"lo": lo, "hi": hi, "method": method}
