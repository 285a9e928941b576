"""Mandelbrot escape times: a per-point `while` batched over a grid with `jax.vmap`.

`escape_time(c)` iterates `z = z*z + c` while `abs(z) <= 2 and n < max_iter:`, a loop whose
trip count depends on the point. Converted, it is one `lax.while_loop` with a complex carry;
under `jax.vmap` over a grid of points the loop runs until the slowest point escapes, each point
keeping its own `z` and `n` (its body is masked once its own test is false).
"""

import jax
import jax.numpy as jnp

import transpiler
from samples.common import agree, per_call, run

SHADES = " .:-=+*#%@"


def escape_time(c, max_iter=30):
    """How many iterations `z = z*z + c` from 0 stays within |z| <= 2 (at most `max_iter`)."""
    z = 0j
    n = 0
    while abs(z) <= 2 and n < max_iter:
        z = z * z + c
        n += 1
    return n


def escape_times(cs, max_iter=30):
    """`escape_time` of every point of `cs` (any shape)."""
    flat = jax.vmap(escape_time, in_axes=(0, None))(cs.reshape(-1), max_iter)
    return flat.reshape(cs.shape)


def grid(rows=12, cols=40, re=(-2.2, 0.8), im=(-1.2, 1.2)):
    """A `rows` x `cols` grid of complex points, the first row at the top (largest imaginary)."""
    x = jnp.linspace(re[0], re[1], cols)
    y = jnp.linspace(im[1], im[0], rows)
    return (x[None, :] + 1j * y[:, None]).astype(jnp.complex64)


def render(counts, max_iter=30):
    """One character per point: darker the longer it stays bounded; '@' for points inside."""
    last = len(SHADES) - 1
    return [
        "".join(SHADES[min(last, n * last // max_iter)] for n in row) for row in counts.tolist()
    ]


def main():
    print("escape time of one point, c = -0.75 + 0.12j (a slow escape near the neck):")
    n, _ = run(escape_time, jnp.complex64(-0.75 + 0.12j))
    print(f"  {int(n)} iterations")

    cs = grid()
    compiled_fn = transpiler.jit(escape_times)
    counts = compiled_fn(cs)
    # Eager `jax.vmap` cannot run Python's `while` on a batch: the reference is point by point.
    eager = jnp.array([[escape_time(c) for c in row] for row in cs])
    agree(eager, counts)
    seconds = per_call(compiled_fn, cs)
    print(f"{cs.size} points with jax.vmap, {seconds * 1e3:.3g} ms per call (equal to eager):")
    for line in render(counts):
        print(f"  |{line}|")
    print(f"  {int((counts == 30).sum())} points did not escape within 30 iterations")


if __name__ == "__main__":
    main()
