"""The gamma distribution's inverse CDF (shape <= 1), so bursty arrivals are drawn from uniforms.

Drawing gamma gaps by inversion of the same uniforms couples the traces of one seed across
burstiness: at a higher CV the short gaps shrink and the long ones grow, request by request,
and the prompt and output lengths drawn after them are the same requests. A comparison across
CVs (fleet's sustainable rate, simulate --cv) then measures the burstiness, not two unrelated
samples of it (common random numbers; numpy's own gamma sampler rejects a shape-dependent
number of draws, so its traces at two shapes share nothing).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from numpy.typing import NDArray

# Terms of the series and of the continued fraction for the regularized incomplete gamma
# function (Numerical Recipes, 3rd ed., 6.2: gser / gcf); for shape <= 1 the series (x < a + 1)
# shrinks by x / (a + n) <= 2 / n a term and the fraction converges in well under this many.
INCOMPLETE_GAMMA_TERMS = 60
# Newton steps on log x, each kept inside the bisection bracket: a uniform converges in ~12.
MAX_NEWTON_STEPS = 60
RELATIVE_TOLERANCE = 1e-12
# log of the smallest normal double: a gap below e^-708 s is zero to any clock.
LOG_TINY = -708.0
TINY = 1e-300
# Beyond a + 60 the gamma's upper tail (shape <= 1) is below 1e-26: P = 1 in double precision,
# the bracket's upper end.
TAIL_SPAN = 60.0


def regularized_lower_gamma(a: float, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(a, x), the unit-scale gamma CDF of shape `a` at each x >= 0."""
    out = np.zeros_like(x)
    pos = x > 0
    log_x = np.log(np.where(pos, x, 1.0))
    front = np.exp(a * log_x - x - math.lgamma(a))  # x^a e^-x / Gamma(a)
    series = pos & (x < a + 1)
    if series.any():
        xs = x[series]
        term = np.full(xs.shape, 1.0 / a)
        total = term.copy()
        for n in range(1, INCOMPLETE_GAMMA_TERMS):
            term = term * xs / (a + n)
            total += term
        out[series] = front[series] * total
    tail = pos & ~series
    if tail.any():
        xt = x[tail]
        b = xt + 1.0 - a  # Q(a, x) by Lentz's method
        c = np.full(xt.shape, 1.0 / TINY)
        d = 1.0 / b
        h = d.copy()
        for i in range(1, INCOMPLETE_GAMMA_TERMS):
            an = -i * (i - a)
            b = b + 2.0
            d = an * d + b
            d = np.where(np.abs(d) < TINY, TINY, d)
            c = b + an / c
            c = np.where(np.abs(c) < TINY, TINY, c)
            d = 1.0 / d
            h = h * d * c
        out[tail] = 1.0 - front[tail] * h
    return out


def gamma_quantile(u: NDArray[np.float64], a: float) -> NDArray[np.float64]:
    """x with P(a, x) = u for each uniform u in (0, 1): the unit-scale gamma's inverse CDF,
    shape 0 < a <= 1, by Newton steps on log x kept inside a bisection bracket."""
    if not 0 < a <= 1:
        raise ValueError(f"shape {a} outside (0, 1]")
    log_gamma = math.lgamma(a)
    # start from the smaller of the small-x form (P ~ x^a / Gamma(a + 1)) and the exponential's
    t = np.minimum((np.log(u) + math.lgamma(a + 1)) / a, np.log(-np.log1p(-u)))
    top = math.log(a + TAIL_SPAN)
    t = np.clip(t, LOG_TINY, top)
    low = np.full(u.shape, LOG_TINY)
    high = np.full(u.shape, top)
    todo = np.arange(u.size)
    for _ in range(MAX_NEWTON_STEPS):
        tt = t[todo]
        x = np.exp(tt)
        f = regularized_lower_gamma(a, x) - u[todo]
        lo = np.where(f < 0, tt, low[todo])
        hi = np.where(f >= 0, tt, high[todo])
        density = np.exp(a * tt - x - log_gamma)  # dP / d(log x)
        step = np.where(density > 0, f / np.maximum(density, TINY), 0.0)
        nxt = tt - step
        nxt = np.where((nxt > lo) & (nxt < hi), nxt, (lo + hi) / 2)
        done = (np.abs(f) <= RELATIVE_TOLERANCE * u[todo]) | (hi - lo < RELATIVE_TOLERANCE)
        t[todo] = np.where(done, tt, nxt)
        low[todo], high[todo] = lo, hi
        todo = todo[~done]
        if todo.size == 0:
            break
    out: NDArray[np.float64] = np.exp(t)
    return out


# Inverted streams kept (uniforms and their quantiles, by the stream's first draws and the
# shape): a rate search draws each seed's trace at several lengths, each a prefix of the same
# stream (numpy's Generator.random(n) is the first n of random(m) for m > n), so only the draws
# past the longest inverted so far are new.
CACHED_STREAMS = 32
_STREAMS: OrderedDict[tuple[bytes, float], tuple[NDArray[np.float64], NDArray[np.float64]]] = (
    OrderedDict()
)
STREAM_KEY_DRAWS = 4


def gamma_gaps(u: NDArray[np.float64], a: float) -> NDArray[np.float64]:
    """Unit-mean gamma gaps of shape `a` (CV 1 / sqrt(a)) from uniforms, by inversion; a
    search that re-draws one stream at several lengths inverts each uniform once."""
    u = np.ascontiguousarray(u, dtype=np.float64)
    key = (u[:STREAM_KEY_DRAWS].tobytes(), a)
    known = _STREAMS.get(key)
    if known is not None:
        seen, x = known
        m = min(seen.size, u.size)
        if np.array_equal(seen[:m], u[:m]):
            if u.size > seen.size:
                x = np.concatenate([x, gamma_quantile(u[seen.size :], a)])
                _STREAMS[key] = (u.copy(), x)
            _STREAMS.move_to_end(key)
            out: NDArray[np.float64] = x[: u.size] / a
            return out
    x = gamma_quantile(u, a)
    _STREAMS[key] = (u.copy(), x)
    while len(_STREAMS) > CACHED_STREAMS:
        _STREAMS.popitem(last=False)
    fresh: NDArray[np.float64] = x / a
    return fresh
