"""`python -m transpiler demo`: converts the sample programs, shows what they became, runs them.

The programs are the modules of the `samples` package, installed next to `transpiler` and
imported as any user module is.
"""

from __future__ import annotations

import contextlib
import sys
import time


@contextlib.contextmanager
def _compiling(name: str):
    """A progress line while `name` compiles, erased after; only when stdout is a terminal."""
    line = f"  compiling {name} ..."
    tty = sys.stdout.isatty()
    if tty:
        print(line, end="\r", flush=True)
    try:
        yield
    finally:
        if tty:
            print(" " * len(line), end="\r", flush=True)


def _summary(fn, *args, **jit_kwargs) -> None:
    """Prints the one-line summary of the graph of `fn` on `args` (traced and compiled, not run)."""
    import transpiler

    print(f"  {transpiler.graph(fn, **jit_kwargs)(*args).summary().line()}")


def _row(label: str, value) -> None:
    print(f"  {label:<40} {value}")


def main(show_graph: bool = True) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import samples.clipped_rnn
    import samples.greedy_decoder
    import samples.newton_sqrt
    import samples.piecewise
    import transpiler

    print(f"astgraph demo: jax {jax.__version__} on {jax.devices()[0].platform.upper()}\n")

    # 1. A data-dependent while loop ---------------------------------------------------------------
    newton = samples.newton_sqrt.newton_sqrt
    t0 = time.perf_counter()
    newton_c = transpiler.convert(newton)
    convert_ms = (time.perf_counter() - t0) * 1e3
    print("== samples/newton_sqrt.py: while loop on a traced convergence test ==")
    print(f"converted in {convert_ms:.1f} ms; generated source:\n")
    print("    " + transpiler.to_source(newton).replace("\n", "\n    "))
    newton_jit = jax.jit(newton_c)
    with _compiling("newton_sqrt"):
        _summary(newton_c, 2.0)
        newton_jit(2.0)
    for a in (2.0, 10.0):
        _row(f"eager Python        newton_sqrt({a})", newton(a))
        x, steps = newton_jit(a)
        _row(f"converted + jit     newton_sqrt({a})", (float(x), int(steps)))
    # Reverse mode cannot go through lax.while_loop (its trip count is unknown); forward mode can.
    eager_d = jax.jacfwd(lambda a: newton(a)[0])(2.0)
    with _compiling("jacfwd(newton_sqrt)"):
        staged_d = jax.jit(jax.jacfwd(lambda a: newton_c(a)[0]))(2.0)
    _row("d sqrt(a)/da at 2, eager (jacfwd)", f"{float(eager_d):.6f}")
    _row("d sqrt(a)/da at 2, converted + jit", f"{float(staged_d):.6f}")
    _row("exact 1/(2 sqrt 2)", f"{1 / (2 * np.sqrt(2.0)):.6f}")

    # 2. A traced if inside a for loop -------------------------------------------------------------
    rnn = samples.clipped_rnn.clipped_rnn
    rnn_c = transpiler.convert(rnn)
    print("\n== samples/clipped_rnn.py: traced if inside a for loop over range(T), T = 50 ==")
    key_w, key_x = jax.random.split(jax.random.PRNGKey(0))
    w = jax.random.normal(key_w, (4, 4))
    xs = jax.random.normal(key_x, (50, 4))
    if show_graph:
        jaxpr = jax.make_jaxpr(rnn_c)(w, xs)
        print("    " + str(jaxpr).replace("\n", "\n    "))
    with _compiling("clipped_rnn"):
        _summary(rnn_c, w, xs)
        staged = jax.jit(rnn_c)(w, xs)
    eager = rnn(w, xs)
    _row("eager Python", f"{float(eager):.6f}")
    _row("converted + jit", f"{float(staged):.6f}")
    g_eager = jax.grad(rnn)(w, xs)
    with _compiling("grad(clipped_rnn)"):
        g_staged = jax.jit(jax.grad(rnn_c))(w, xs)
    _row("grad wrt w, eager (norm)", f"{float(jnp.linalg.norm(g_eager)):.6f}")
    _row("grad wrt w, converted + jit (norm)", f"{float(jnp.linalg.norm(g_staged)):.6f}")
    _row("max |difference| of the gradients", f"{float(jnp.max(jnp.abs(g_eager - g_staged))):.2e}")

    # 3. if/elif, ternaries, and/or, chained comparisons, vmapped ----------------------------------
    piecewise = samples.piecewise
    smooth_c = transpiler.convert(piecewise.smooth_l1)
    print("\n== samples/piecewise.py: if/elif under vmap and grad; ternary, 'and', chains ==")
    xs = jnp.array([-20.0, -3.0, -0.5, 0.25, 4.0, 30.0])
    with _compiling("vmap(smooth_l1)"):
        _summary(jax.vmap(smooth_c), xs)
        staged = jax.jit(jax.vmap(smooth_c))(xs)
    _row("eager Python", [round(float(piecewise.smooth_l1(x)), 4) for x in xs])
    _row("converted, jit(vmap)", [round(float(v), 4) for v in staged])
    _row("grad, eager", [float(jax.grad(piecewise.smooth_l1)(x)) for x in xs])
    with _compiling("vmap(grad(smooth_l1))"):
        grads = jax.jit(jax.vmap(jax.grad(smooth_c)))(xs)
    _row("grad, converted, jit(vmap(grad))", grads.tolist())
    band_c = transpiler.convert(piecewise.band_count)
    values = np.array([-2.0, 0.5, 1.5, 3.0, 0.9])
    with _compiling("band_count"):
        _summary(band_c, values, 0.0, 2.0)
        count, total = jax.jit(band_c)(values, 0.0, 2.0)
    _row("band_count eager (NumPy input)", piecewise.band_count(values, 0.0, 2.0))
    _row("band_count converted, NumPy input", band_c(values, 0.0, 2.0))
    _row("band_count converted + jit", (int(count), round(float(total), 6)))

    # 4. A model class, a helper, a list, an early exit --------------------------------------------
    decoder = samples.greedy_decoder.TinyDecoder(seed=1)
    decode_c = transpiler.convert(decoder.decode)
    print("\n== samples/greedy_decoder.py: method + helper call + list.append + break, bounded ==")
    h0 = jnp.ones(8) * 0.1
    with _compiling("TinyDecoder.decode"):
        _summary(decode_c, h0, 4)
        tokens_c, n_c, score_c = jax.jit(decode_c)(h0, 4)
    tokens, n, score = decoder.decode(h0, 4)
    _row("eager Python: tokens, score", (tokens.tolist(), round(float(score), 4)))
    _row(
        "converted + jit: tokens, score", (tokens_c[: int(n_c)].tolist(), round(float(score_c), 4))
    )
    _row("converted + jit: the token buffer", tokens_c.tolist())
    grad_eager = jax.grad(lambda h: decoder.decode(h, 4, temperature=1.0)[2])(h0)
    with _compiling("grad(TinyDecoder.decode)"):
        grad_c = jax.jit(jax.grad(lambda h: decode_c(h, 4, temperature=1.0)[2]))(h0)
    _row("d score / d h0, eager (norm)", f"{float(jnp.linalg.norm(grad_eager)):.6f}")
    _row("d score / d h0, converted + jit (norm)", f"{float(jnp.linalg.norm(grad_c)):.6f}")
