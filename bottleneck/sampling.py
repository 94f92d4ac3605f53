"""How many requests a window's quantile needs before it says anything: distribution-free rank intervals. Pure.

A window's P50 or P99 is an estimate from the ``n`` requests it saw. Whatever the latency
distribution ``F`` (continuous), the number ``B`` of requests at or below the true q-quantile
``xi_q`` is ``Binomial(n, q)``, so for the order statistics ``X_(1) <= ... <= X_(n)``

    P(X_(l) <= xi_q < X_(u)) = P(l <= B < u) = sum_{k=l}^{u-1} C(n, k) q^k (1 - q)^(n - k).

The two-sided ``1 - alpha`` interval takes the largest ``l`` with ``P(B < l) <= alpha/2`` and the
smallest ``u`` with ``P(B >= u) <= alpha/2`` (``rank_interval``). The data bound the quantile only
when both ends are requests the window saw: ``l >= 1`` needs ``(1 - q)^n <= alpha/2`` and
``u <= n`` needs ``q^n <= alpha/2``. For ``q >= 0.5`` the second binds, so the fewest requests
that bound a q-quantile at all are

    n_min(q) = ceil(ln(alpha / 2) / ln(max(q, 1 - q))).

At ``alpha = 0.05``: the median needs 6 requests, the P90 36, the P99 368 (one-sided, only an
upper bound: 299). Below ``n_min`` the window's quantile is an interpolation past its largest
request: the true P99 of a window with 20 requests may lie anywhere above its second largest, so a
verdict resting on it is a hint, not a fact. The bound is necessary, not sufficient: at ``n_min``
the interval spans the whole sample. The classifier applies it to the statistic its verdict rests
on (the median decides where the window has one; a P99 decides alone only when it breaches the SLO
or the median collapsed), so a window of 20 requests can still carry a confident verdict on its
medians, never on its tail alone.
"""

from __future__ import annotations

import math

ALPHA = 0.05  # a 95 % interval: the level an SRE reads a latency percentile at


def binomial_cdf(k: int, n: int, q: float) -> float:
    """``P(B <= k)`` for ``B ~ Binomial(n, q)`` (exact sum; ``n`` is a window's request count)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    # Sum in log space: C(n, k) q^k (1-q)^(n-k) underflows for the P99 at n in the thousands otherwise.
    lq, lp = math.log(q), math.log1p(-q)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lq + (n - i) * lp)
    return min(1.0, total)


def rank_interval(n: int, q: float, alpha: float = ALPHA) -> tuple[int, int]:
    """The ranks ``(l, u)`` (1-based) with ``P(X_(l) <= xi_q < X_(u)) >= 1 - alpha``.

    ``l == 0`` means no lower bound among the requests (below the smallest), ``u == n + 1`` no upper
    bound (above the largest): the window cannot bound its q-quantile on that side.
    """
    if n < 1:
        raise ValueError("a quantile needs at least one request")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    half = alpha / 2.0
    low = 0
    for rank in range(1, n + 1):  # P(B < rank) = P(B <= rank - 1)
        if binomial_cdf(rank - 1, n, q) <= half:
            low = rank
        else:
            break
    high = n + 1
    for rank in range(n, 0, -1):  # P(B >= rank) = 1 - P(B <= rank - 1)
        if 1.0 - binomial_cdf(rank - 1, n, q) <= half:
            high = rank
        else:
            break
    return low, high


def min_requests(q: float, alpha: float = ALPHA) -> int:
    """The fewest requests whose two-sided ``1 - alpha`` interval of the q-quantile lies within the sample."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    return math.ceil(math.log(alpha / 2.0) / math.log(max(q, 1.0 - q)) - 1e-12)


def bounded(n: float | None, q: float, alpha: float = ALPHA) -> bool | None:
    """Does a window of ``n`` requests bound its q-quantile? ``None`` when the count is unknown."""
    if n is None:
        return None
    return n >= min_requests(q, alpha)


MEDIAN_MIN_REQUESTS = min_requests(0.5)  # 6
TAIL_MIN_REQUESTS = min_requests(0.99)  # 368
