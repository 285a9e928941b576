"""Piecewise functions with `if`/`elif`, a ternary, `and`, and a chained comparison."""

import jax.numpy as jnp


def smooth_l1(x, beta=1.0):
    """Huber-style loss of a scalar: quadratic near zero, linear outside."""
    ax = jnp.abs(x)
    if ax < beta:
        loss = 0.5 * x * x / beta
    elif ax < 10 * beta:
        loss = ax - 0.5 * beta
    else:
        loss = 2 * ax - 10.5 * beta  # steeper far out
    return loss


def band_count(xs, lo, hi):
    """How many entries of `xs` lie strictly between `lo` and `hi`, and their clipped sum."""
    count = 0
    total = 0.0
    for x in xs:
        inside = lo < x < hi
        count = count + (1 if inside else 0)
        total = total + (x if inside and x > 0 else 0.0)
    return count, total
