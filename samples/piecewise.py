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


def main():
    import transpiler
    from samples.common import run

    print("smooth_l1: quadratic below 1, linear below 10, steeper beyond:")
    run(smooth_l1, 4.0)
    compiled = transpiler.jit(smooth_l1)
    for x in [-20.0, -3.0, -0.5, 0.25, 30.0]:
        print(f"  smooth_l1({x:5}) = {float(compiled(x)):7.4f} (eager {float(smooth_l1(x)):7.4f})")
    values = [-2.0, 0.5, 1.5, 3.0, 0.9]
    print(f"band_count of {values}, strictly between 0 and 2:")
    _, (count, total) = run(band_count, jnp.array(values), 0.0, 2.0)
    print(f"  {int(count)} inside, their positive sum {float(total):.4f}")


if __name__ == "__main__":
    main()
