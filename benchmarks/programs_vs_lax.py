"""Run time and compile time of whole programs, converted, next to the same algorithm in `lax`.

Each program is written twice: as plain Python, the way a user writes it (converted with
`transpiler.convert`), and with `lax`, the way an expert writes the same algorithm (a
`lax.while_loop` where the Python loop can stop early, `jnp.where` for a cheap scalar or
elementwise choice). The two are checked to give the same results, then timed side by side in
one run:

- run time: both jitted, timed alternately, best of `--rounds` rounds of `--repeats` x N calls
  (N chosen so that one repeat takes about `--target-ms`), `block_until_ready` after each repeat;
- compile time: convert (for the converted one) + trace + lower + compile, best of
  `--compile-repeats`. Each repeat imports the program's module afresh (new function objects, new
  code objects, so neither the conversion cache nor JAX's caches can hide any cost, including the
  conversion of the helpers the program calls) and calls `jax.clear_caches()`. The last column is
  the conversion alone (`transpiler.convert`, part of the converted compile time).

The programs are the ones below plus every function in `samples/` that its `main()` compiles
(hand-written here or, for most samples, in `samples_lax.py`).

    python benchmarks/programs_vs_lax.py
    python benchmarks/programs_vs_lax.py --phases --compile-repeats 7 [--only NAME]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import pathlib
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from runtime_vs_lax import best_of  # a sibling script: run these as scripts

import transpiler

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SAMPLES_LAX = ROOT / "benchmarks" / "samples_lax.py"  # the other samples, hand-written


# Bisection root finding: a `while` on a traced test, an `if` on a traced value.


def cubic(x):
    return x * x * x - 2.0 * x - 5.0


def bisection(lo, hi, tol):
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if cubic(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def bisection_lax(lo, hi, tol):
    def body(state):
        lo, hi = state
        mid = 0.5 * (lo + hi)
        positive = cubic(mid) > 0
        return jnp.where(positive, lo, mid), jnp.where(positive, mid, hi)

    lo, hi = lax.while_loop(lambda s: s[1] - s[0] > tol, body, (lo, hi))
    return 0.5 * (lo + hi)


# Power iteration: `for` over a static range, `break` on convergence, a `for ... else`.


def power_iteration(a, v, tol, max_iter=100):
    lam = jnp.float32(0.0)
    for _ in range(max_iter):
        w = a @ v
        v = w / jnp.linalg.norm(w)
        lam_new = v @ (a @ v)
        if jnp.abs(lam_new - lam) < tol:
            lam = lam_new
            converged = True
            break
        lam = lam_new
    else:
        converged = False
    return lam, v, converged


def power_iteration_lax(a, v, tol, max_iter=100):
    def cond(state):
        i, _, _, done = state
        return jnp.logical_and(i < max_iter, jnp.logical_not(done))

    def body(state):
        i, lam, v, _ = state
        w = a @ v
        v = w / jnp.linalg.norm(w)
        lam_new = v @ (a @ v)
        return i + 1, lam_new, v, jnp.abs(lam_new - lam) < tol

    _, lam, v, converged = lax.while_loop(cond, body, (0, jnp.float32(0.0), v, False))
    return lam, v, converged


# Edit distance: nested `for` loops over traced trip counts (padded int arrays).


def edit_distance(a, b, n, m):
    prev = jnp.arange(b.shape[0] + 1)
    for i in range(n):
        cur = prev.at[0].set(i + 1)
        for j in range(m):
            if a[i] == b[j]:
                cost = 0
            else:
                cost = 1
            best = jnp.minimum(jnp.minimum(prev[j + 1] + 1, cur[j] + 1), prev[j] + cost)
            cur = cur.at[j + 1].set(best)
        prev = cur
    return prev[m]


def edit_distance_lax(a, b, n, m):
    def row(i, prev):
        def cell(j, cur):
            cost = jnp.where(a[i] == b[j], 0, 1)
            best = jnp.minimum(jnp.minimum(prev[j + 1] + 1, cur[j] + 1), prev[j] + cost)
            return cur.at[j + 1].set(best)

        return lax.fori_loop(0, m, cell, prev.at[0].set(i + 1))

    return lax.fori_loop(0, n, row, jnp.arange(b.shape[0] + 1))[m]


# Variable-length RNN: static T_max, traced length, `break` out of the `for`.


def masked_rnn(w, u, xs, length):
    h = jnp.zeros(w.shape[0])
    for t in range(xs.shape[0]):
        if t >= length:
            break
        h = jnp.tanh(w @ h + u @ xs[t])
    return h


def masked_rnn_lax(w, u, xs, length):
    def step(h, inputs):
        t, x = inputs
        return jnp.where(t < length, jnp.tanh(w @ h + u @ x), h), None

    h0 = jnp.zeros(w.shape[0])
    return lax.scan(step, h0, (jnp.arange(xs.shape[0]), xs))[0]


# Conjugate gradient: `while` on `rs > tol and k < max_iter`.


def conjugate_gradient(a, b, tol, max_iter=200):
    x = jnp.zeros_like(b)
    r = b - a @ x
    p = r
    rs = r @ r
    k = 0
    while rs > tol and k < max_iter:
        ap = a @ p
        alpha = rs / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
        k += 1
    return x, k


def conjugate_gradient_lax(a, b, tol, max_iter=200):
    def cond(state):
        _, _, _, rs, k = state
        return jnp.logical_and(rs > tol, k < max_iter)

    def body(state):
        x, r, p, rs, k = state
        ap = a @ p
        alpha = rs / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        return x, r, p, rs_new, k + 1

    x = jnp.zeros_like(b)
    r = b - a @ x
    x, _, _, _, k = lax.while_loop(cond, body, (x, r, r, r @ r, 0))
    return x, k


# Linear search: `return` from inside a `for` over the array's length.


def linear_search(x, target):
    for i in range(x.shape[0]):
        if x[i] == target:
            return i
    return -1


def linear_search_lax(x, target):
    def cond(i):
        return jnp.logical_and(i < x.shape[0], x[jnp.minimum(i, x.shape[0] - 1)] != target)

    i = lax.while_loop(cond, lambda i: i + 1, 0)
    return jnp.where(i < x.shape[0], i, -1)


# An RNN whose states are a list it appends to and reads back (`hs[-1]`), as users write it.


def list_rnn(w, u, xs):
    hs = [jnp.zeros(w.shape[0])]
    for t in range(xs.shape[0]):
        hs.append(jnp.tanh(w @ hs[-1] + u @ xs[t]))
    return jnp.stack(hs[1:])


def list_rnn_lax(w, u, xs):
    def step(h, x):
        h = jnp.tanh(w @ h + u @ x)
        return h, h

    _, hs = lax.scan(step, jnp.zeros(w.shape[0]), xs)
    return hs


# Dynamic programming over a list it grows, read at the index (`best[i - 1]`, `best[i - 2]`).


def max_independent_sum(x):
    best = [x[0], jnp.maximum(x[0], x[1])]
    for i in range(2, x.shape[0]):
        best.append(jnp.maximum(best[i - 1], best[i - 2] + x[i]))
    return best[-1]


def max_independent_sum_lax(x):
    def step(carry, xi):
        two_back, one_back = carry
        return (one_back, jnp.maximum(one_back, two_back + xi)), None

    (_, best), _ = lax.scan(step, (x[0], jnp.maximum(x[0], x[1])), x[2:])
    return best


# Hand-written versions of the functions in samples/.


def clipped_rnn_lax(w, xs, max_norm=2.0):
    def step(h, x):
        h = jnp.tanh(w @ h + x)
        norm = jnp.sqrt(jnp.sum(h * h))
        return jnp.where(norm > max_norm, h * (max_norm / norm), h * 1.5), None

    return jnp.mean(lax.scan(step, jnp.zeros(w.shape[0]), xs)[0])


def greedy_decode_lax(decoder, h, first, max_len=8):
    # temperature 0: the sample's `softmax_temperature` is a one-hot of the argmax.
    vocab = decoder.out.shape[1]

    def cond(state):
        _, token, _, steps, _ = state
        return jnp.logical_and(token != 0, steps < max_len)  # 0 = samples.greedy_decoder.END

    def body(state):
        h, token, buffer, steps, score = state
        h = jnp.tanh(decoder.w @ h + decoder.embed[token])
        probs = jax.nn.one_hot(jnp.argmax(h @ decoder.out), vocab)
        token = jnp.argmax(probs)
        score = score + jnp.log(probs[token] + 1e-6)
        return h, token, buffer.at[steps].set(token), steps + 1, score

    buffer = jnp.zeros(max_len, jnp.int32)
    state = (h, jnp.asarray(first), buffer, 0, jnp.float32(0.0))
    _, _, buffer, count, score = lax.while_loop(cond, body, state)
    return buffer, count, score


def newton_sqrt_lax(a, tol=1e-6):
    def body(state):
        x, _, steps = state
        x_next = 0.5 * (x + a / x)
        return x_next, jnp.abs(x_next - x) < tol * x_next, steps + 1

    x, _, steps = lax.while_loop(lambda s: jnp.logical_not(s[1]), body, (a, False, 0))
    return x, steps


def smooth_l1_lax(x, beta=1.0):
    ax = jnp.abs(x)
    far = jnp.where(ax < 10 * beta, ax - 0.5 * beta, 2 * ax - 10.5 * beta)
    return jnp.where(ax < beta, 0.5 * x * x / beta, far)


def band_count_lax(xs, lo, hi):
    def step(carry, x):
        count, total = carry
        inside = jnp.logical_and(lo < x, x < hi)
        count = count + jnp.where(inside, 1, 0)
        total = total + jnp.where(jnp.logical_and(inside, x > 0), x, 0.0)
        return (count, total), None

    return lax.scan(step, (0, jnp.float32(0.0)), xs)[0]


# Cases: how to get each function from a freshly imported module, and the arguments.

_fresh = itertools.count()


def fresh_module(path: pathlib.Path):
    """Imports `path` as a new module: new functions, new code objects, nothing cached."""
    spec = importlib.util.spec_from_file_location(f"_bench_fresh_{next(_fresh)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _own(name: str) -> Callable:
    """Picks `name` and `name_lax` out of (a fresh import of) this file."""
    return lambda module, lax_module: (getattr(module, name), getattr(lax_module, f"{name}_lax"))


def _decoder_pair(module, lax_module):
    decoder = module.TinyDecoder()
    return decoder.decode, functools.partial(lax_module.greedy_decode_lax, decoder)


def _sample(name: str, **bound) -> Callable:
    """Picks `name` out of (a fresh import of) its sample and `name_lax` out of a fresh import of
    samples_lax.py, both with the arguments `bound` (those `jax.jit` cannot trace)."""

    def pick(module, _):
        fn, ref = getattr(module, name), getattr(fresh_module(SAMPLES_LAX), f"{name}_lax")
        if bound:
            return functools.partial(fn, **bound), functools.partial(ref, **bound)
        return fn, ref

    return pick


def _fit_pair(module, _):
    """The Equinox `fit` and `fit_lax` as functions of the model's arrays."""
    ref = fresh_module(SAMPLES_LAX)
    model = module.make_model(jax.random.PRNGKey(0))
    return ref.fit_on_arrays(module.fit, model), ref.fit_on_arrays(ref.fit_lax, model)


def _nnx_pair(module, _):
    """The NNX training step (loss and gradients) of the model and of `deep_net_lax`."""
    ref = fresh_module(SAMPLES_LAX)
    graphdef = ref.nnx.split(module.make_model())[0]
    return ref.value_and_grads(module.loss, graphdef), ref.value_and_grads(ref.loss_lax, graphdef)


def _installed(*names: str) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in names)


def sample_cases() -> list[tuple[str, pathlib.Path, Callable, tuple]]:
    """The cases of the samples hand-written in samples_lax.py, with their `main()`'s inputs."""
    from samples import beam_search, edit_distance, kmeans, loss_scaling, mandelbrot

    y0, t_end, damping = jnp.array([1.0, 0.0]), jnp.float32(3.0), jnp.float32(0.5)
    (a, len_a), (b, len_b) = edit_distance.encode("kitten"), edit_distance.encode("sitting")
    pairs = [(edit_distance.encode(x), edit_distance.encode(y)) for x, y in edit_distance.WORDS]
    batch = (
        jnp.stack([x for (x, _), _ in pairs]),
        jnp.stack([y for _, (y, _) in pairs]),
        jnp.array([n for (_, n), _ in pairs]),
        jnp.array([n for _, (_, n) in pairs]),
    )
    centers = jnp.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.7]])
    starts = jnp.array([[1.5, 1.5], [1.6, 1.4], [20.0, 20.0], [1.4, 1.6]])
    params = loss_scaling.init_params(jax.random.PRNGKey(0))
    x, y = loss_scaling.data(jax.random.PRNGKey(1))
    found = [
        (
            "samples integrate (adaptive ode)",
            SAMPLES / "adaptive_ode.py",
            _sample("integrate"),
            (y0, t_end, damping),
        ),
        (
            "samples position_gradient (ode)",
            SAMPLES / "adaptive_ode.py",
            _sample("position_gradient"),
            (damping, y0, t_end),
        ),
        (
            "samples beam_search (3 beams, 10)",
            SAMPLES / "beam_search.py",
            _sample("beam_search"),
            beam_search.make_model(jax.random.PRNGKey(0)),
        ),
        (
            "samples edit_distance (6x7 of 8)",
            SAMPLES / "edit_distance.py",
            _sample("edit_distance"),
            (a, b, len_a, len_b),
        ),
        (
            "samples edit_distance_rows (6x7)",
            SAMPLES / "edit_distance.py",
            _sample("edit_distance_rows"),
            (a, b, len_a, len_b),
        ),
        (
            "samples edit_distances (vmap, 4)",
            SAMPLES / "edit_distance.py",
            _sample("edit_distances"),
            batch,
        ),
        (
            "samples kmeans (30 points, k=4)",
            SAMPLES / "kmeans.py",
            _sample("kmeans"),
            (kmeans.blobs(jax.random.PRNGKey(0), centers), starts),
        ),
        (
            "samples train (loss scaling, f16)",
            SAMPLES / "loss_scaling.py",
            _sample("train", dtype=jnp.float16),
            (params, x, y, 40),
        ),
        (
            "samples train (loss scaling, bf16)",
            SAMPLES / "loss_scaling.py",
            _sample("train", dtype=jnp.bfloat16),
            (params, x, y, 40),
        ),
        (
            "samples escape_time",
            SAMPLES / "mandelbrot.py",
            _sample("escape_time"),
            (jnp.complex64(-0.75 + 0.12j),),
        ),
        (
            "samples escape_times (vmap, 12x40)",
            SAMPLES / "mandelbrot.py",
            _sample("escape_times"),
            (mandelbrot.grid(),),
        ),
        (
            "samples metropolis (n=500)",
            SAMPLES / "metropolis.py",
            _sample("metropolis", n=500),
            (jax.random.key(0), jnp.zeros(2)),
        ),
    ]
    if _installed("equinox", "optax"):
        import equinox as eqx

        from samples import mlp_early_stopping as mlp

        model = mlp.make_model(jax.random.PRNGKey(0))
        found.append(
            (
                "samples fit (equinox mlp, adam)",
                SAMPLES / "mlp_early_stopping.py",
                _fit_pair,
                (eqx.filter(model, eqx.is_array), *mlp.data(jax.random.PRNGKey(1))),
            )
        )
    if _installed("flax"):
        from flax import nnx

        from samples import nnx_layers

        found.append(
            (
                "samples DeepNet loss, grads (nnx)",
                SAMPLES / "nnx_layers.py",
                _nnx_pair,
                (nnx.split(nnx_layers.make_model())[1], -0.05 * jnp.ones(8)),
            )
        )
    return found


def cases() -> list[tuple[str, pathlib.Path, Callable, tuple]]:
    """(name, file of the user's function, (its module, this module) -> (user fn, lax fn), args).

    Arguments are all traced under `jax.jit` (Python numbers too, as weakly typed scalars)."""
    key = jax.random.split(jax.random.PRNGKey(0), 8)
    here = pathlib.Path(__file__).resolve()

    q, _ = jnp.linalg.qr(jax.random.normal(key[0], (64, 64)))
    spd = (q * jnp.linspace(1.0, 10.0, 64).at[-1].set(20.0)) @ q.T  # symmetric positive definite
    length_a, length_b = 48, 56
    seq_a = jax.random.randint(key[1], (64,), 0, 4)
    seq_b = jax.random.randint(key[2], (64,), 0, 4)
    w = jax.random.normal(key[3], (64, 64)) * 0.15
    u = jax.random.normal(key[4], (64, 32)) * 0.3
    xs = jax.random.normal(key[5], (256, 32))
    search = jnp.arange(4096, dtype=jnp.int32)
    rhs = jax.random.normal(key[6], (64,))
    rhs_long = jax.random.normal(key[6], (512,))
    return [
        ("bisection (while + if)", here, _own("bisection"), (1.0, 3.0, 1e-6)),
        (
            "power iteration (break at 11 of 100)",
            here,
            _own("power_iteration"),
            (spd, jnp.ones(64) / 8.0, 1e-5),
        ),
        (
            f"edit distance ({length_a}x{length_b} of 64)",
            here,
            _own("edit_distance"),
            (seq_a, seq_b, length_a, length_b),
        ),
        ("masked rnn (break, T=256, len=200)", here, _own("masked_rnn"), (w, u, xs, 200)),
        ("conjugate gradient (while and)", here, _own("conjugate_gradient"), (spd, rhs, 1e-8)),
        ("linear search (return, 3000/4096)", here, _own("linear_search"), (search, 3000)),
        ("list rnn (hs[-1], T=256)", here, _own("list_rnn"), (w, u, xs)),
        ("list dynamic programming (N=512)", here, _own("max_independent_sum"), (rhs_long,)),
        (
            "samples clipped_rnn (T=256)",
            SAMPLES / "clipped_rnn.py",
            lambda m, ref: (m.clipped_rnn, ref.clipped_rnn_lax),
            (w, jax.random.normal(key[7], (256, 64))),
        ),
        (
            "samples TinyDecoder.decode",
            SAMPLES / "greedy_decoder.py",
            _decoder_pair,
            (jnp.zeros(8), 3),
        ),
        (
            "samples newton_sqrt",
            SAMPLES / "newton_sqrt.py",
            lambda m, ref: (m.newton_sqrt, ref.newton_sqrt_lax),
            (2.0,),
        ),
        (
            "samples smooth_l1",
            SAMPLES / "piecewise.py",
            lambda m, ref: (m.smooth_l1, ref.smooth_l1_lax),
            (3.5,),
        ),
        (
            "samples band_count (N=1024)",
            SAMPLES / "piecewise.py",
            lambda m, ref: (m.band_count, ref.band_count_lax),
            (jax.random.normal(key[5], (1024,)), -0.5, 1.5),
        ),
        *sample_cases(),
    ]


def same_results(a, b) -> bool:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        jnp.shape(x) == jnp.shape(y) and bool(jnp.allclose(x, y, rtol=1e-5, atol=1e-6))
        for x, y in zip(leaves_a, leaves_b)
    )


def calls_per_repeat(fn, args, target_seconds: float) -> int:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return max(1, int(target_seconds / max(time.perf_counter() - start, 1e-7)))


def compile_seconds(path, pick, args, repeats: int) -> tuple[float, float, float]:
    """Best of `repeats`: (convert + trace + lower + compile, of which convert; lax's)."""
    here = pathlib.Path(__file__).resolve()
    best_conv = best_convert = best_ref = float("inf")
    for _ in range(repeats):
        fn, ref = pick(fresh_module(path), fresh_module(here))
        jax.clear_caches()
        start = time.perf_counter()
        converted = transpiler.convert(fn)
        converted_at = time.perf_counter()
        jax.jit(converted).lower(*args).compile()
        best_conv = min(best_conv, time.perf_counter() - start)
        best_convert = min(best_convert, converted_at - start)
        jax.clear_caches()
        start = time.perf_counter()
        jax.jit(ref).lower(*args).compile()
        best_ref = min(best_ref, time.perf_counter() - start)
    return best_conv, best_convert, best_ref


def phase_milliseconds(path, pick, args, repeats: int) -> tuple[list[float], list[float]]:
    """Best of `repeats`, each phase on its own: [convert, trace, lower, compile] of the converted
    program, [0, trace, lower, compile] of the hand-written one, milliseconds."""
    here = pathlib.Path(__file__).resolve()
    best = [[float("inf")] * 4, [float("inf")] * 4]
    for _ in range(repeats):
        fn, ref = pick(fresh_module(path), fresh_module(here))
        for side, (f, convert) in enumerate(((fn, True), (ref, False))):
            jax.clear_caches()
            t0 = time.perf_counter()
            g = transpiler.convert(f) if convert else f
            t1 = time.perf_counter()
            traced = jax.jit(g).trace(*args)
            t2 = time.perf_counter()
            lowered = traced.lower()
            t3 = time.perf_counter()
            lowered.compile()
            t4 = time.perf_counter()
            for i, seconds in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                best[side][i] = min(best[side][i], seconds * 1e3)
    return best[0], best[1]


def print_phases(args) -> None:
    """`--phases`: where the compile time goes, converted against hand-written."""
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; each phase best of "
        f"{args.compile_repeats} fresh compiles, milliseconds (convert / trace / lower / compile)"
    )
    header = f"{'program':<36} | {'converted':>29} | {'hand-written':>22} | {'trace ratio':>11}"
    print(header)
    print("-" * len(header))
    for name, path, pick, fn_args in cases():
        if args.only not in name:
            continue
        conv, ref = phase_milliseconds(path, pick, fn_args, args.compile_repeats)
        shown = " / ".join(f"{x:5.1f}" for x in conv)
        shown_ref = " / ".join(f"{x:5.1f}" for x in ref[1:])
        print(f"{name:<36} | {shown:>29} | {shown_ref:>22} | {conv[1] / ref[1]:11.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target-ms", type=float, default=20.0)
    parser.add_argument("--compile-repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="run only the programs whose name has this")
    parser.add_argument(
        "--phases", action="store_true", help="time convert, trace, lower, compile apart"
    )
    args = parser.parse_args()
    transpiler.convert(cubic)  # the first conversion also builds the runtime namespace
    if args.phases:
        print_phases(args)
        return

    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}; run time: best of {args.rounds} "
        f"rounds x {args.repeats} x N calls (~{args.target_ms:g} ms), microseconds per call; "
        f"compile: convert+trace+lower+compile, best of {args.compile_repeats}, milliseconds"
    )
    header = (
        f"{'program':<36} | {'runtime conv (us)':>17} | {'runtime lax (us)':>16} | {'ratio':>6} | "
        f"{'compile conv (ms)':>17} | {'compile lax (ms)':>16} | {'ratio':>6} | "
        f"{'of which convert (ms)':>21}"
    )
    print(header)
    print("-" * len(header))
    for name, path, pick, fn_args in cases():
        if args.only not in name:
            continue
        fn, ref = pick(fresh_module(path), fresh_module(pathlib.Path(__file__).resolve()))
        converted, reference = jax.jit(transpiler.convert(fn)), jax.jit(ref)
        out_conv, out_ref = jax.block_until_ready((converted(*fn_args), reference(*fn_args)))
        assert same_results(out_conv, out_ref), f"{name}: {out_conv} != {out_ref}"
        number = calls_per_repeat(reference, fn_args, args.target_ms / 1e3)
        number = min(number, calls_per_repeat(converted, fn_args, args.target_ms / 1e3))
        # Alternate the two so machine noise hits both alike.
        t_conv = t_ref = float("inf")
        for _ in range(args.rounds):
            t_conv = min(t_conv, best_of(converted, fn_args, args.repeats, number))
            t_ref = min(t_ref, best_of(reference, fn_args, args.repeats, number))
        c_conv, c_convert, c_ref = compile_seconds(path, pick, fn_args, args.compile_repeats)
        print(
            f"{name:<36} | {t_conv * 1e6:17.1f} | {t_ref * 1e6:16.1f} | {t_conv / t_ref:6.3f} | "
            f"{c_conv * 1e3:17.1f} | {c_ref * 1e3:16.1f} | {c_conv / c_ref:6.2f} | "
            f"{c_convert * 1e3:21.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
