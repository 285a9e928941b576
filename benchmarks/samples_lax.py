"""The programs of `samples/`, written by hand with `lax` the way an expert JAX user would.

Each `NAME_lax` computes what the sample's `NAME` computes (the same steps, iteration counts and
early exits, the same results up to float32 rounding) with `lax.while_loop` where the Python
loop stops on a traced test, `lax.scan` / `lax.fori_loop` over a known range and `jnp.where`
for a cheap choice. The samples' own helpers (the models, densities, losses) are imported as
they are: only the control flow is written by hand. `programs_vs_lax.py` times each next to
the sample converted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from samples.adaptive_ode import damped_oscillator
from samples.beam_search import BOS, EOS
from samples.kmeans import assign
from samples.loss_scaling import scaled_loss
from samples.metropolis import log_density

try:  # the `test` extra
    import equinox as eqx
    import optax

    from samples.mlp_early_stopping import mse
except ImportError:
    eqx = None
try:  # the `integrations` extra
    from flax import nnx
except ImportError:
    nnx = None


# samples/adaptive_ode.py


def _heun_euler_step(y, t, h, t_end, damping, tol):
    """One step of the Heun-Euler pair: (y, t) advanced if accepted, the next h, accepted."""
    h = jnp.minimum(h, t_end - t)
    k1 = damped_oscillator(y, damping)
    y_euler = y + h * k1
    k2 = damped_oscillator(y_euler, damping)
    y_heun = y + 0.5 * h * (k1 + k2)
    err = jnp.max(jnp.abs(y_heun - y_euler))
    accepted = err <= tol
    factor = 0.9 * jnp.sqrt(tol / (err + 1e-12))
    y = jnp.where(accepted, y_heun, y)
    t = jnp.where(accepted, t + h, t)
    return y, t, h * jnp.clip(factor, 0.2, 5.0), accepted


def integrate_lax(y0, t_end, damping, h=0.5, tol=1e-2, max_steps=500):
    """Adaptive Heun-Euler integration to `t_end`: a `while_loop` on `t < t_end`."""

    def cond(state):
        _, t, _, steps, _, _ = state
        return jnp.logical_and(t < t_end, steps < max_steps)

    def body(state):
        y, t, h, steps, accepted, rejected = state
        y, t, h, ok = _heun_euler_step(y, t, h, t_end, damping, tol)
        return y, t, h, steps + 1, accepted + jnp.where(ok, 1, 0), rejected + jnp.where(ok, 0, 1)

    state = (y0, jnp.float32(0.0), jnp.float32(h), 0, 0, 0)
    y, t, _, _, accepted, rejected = lax.while_loop(cond, body, state)
    return y, t, accepted, rejected


def position_gradient_lax(damping, y0, t_end, h=0.5, tol=1e-2, max_steps=500):
    """d x(t_end) / d damping. `lax.while_loop` has no reverse mode: the loop is a `lax.scan` of
    `max_steps` steps, those after `t` reaches `t_end` leaving the state as it is."""

    def final_position(damping):
        def step(state, _):
            y, t, h = state
            y_new, t_new, h_new, _ = _heun_euler_step(y, t, h, t_end, damping, tol)
            running = t < t_end
            new = (y_new, t_new, h_new)
            return jax.tree.map(lambda a, b: jnp.where(running, a, b), new, state), None

        state = (y0, jnp.float32(0.0), jnp.float32(h))
        (y, _, _), _ = lax.scan(step, state, length=max_steps)
        return y[0]

    return jax.grad(final_position)(damping)


# samples/beam_search.py


def beam_search_lax(emb, w_out, beam=3, max_len=10, min_len=3, bonus=0.1):
    """Beam search: a `while_loop` until `max_len` or every beam has ended."""
    vocab = w_out.shape[1]
    only_eos = jnp.where(jnp.arange(vocab) == EOS, 0.0, -jnp.inf)

    def cond(state):
        step, _, _, done = state
        return jnp.logical_and(step < max_len, jnp.logical_not(jnp.all(done)))

    def body(state):
        step, tokens, scores, done = state
        logp = jax.nn.log_softmax(jnp.tanh(emb[tokens[:, step - 1]]) @ w_out)
        logp = jnp.where(done[:, None], only_eos, logp)
        logp = jnp.where(step >= min_len, logp + bonus, logp)
        candidates = (scores[:, None] + logp).reshape(-1)
        top = jnp.argsort(-candidates)[:beam]
        parent, token = top // vocab, top % vocab
        tokens = tokens[parent].at[:, step].set(token)
        return step + 1, tokens, candidates[top], done[parent] | (token == EOS)

    tokens = jnp.full((beam, max_len), EOS).at[:, 0].set(BOS)
    scores = jnp.zeros(beam).at[1:].set(-jnp.inf)
    done = jnp.zeros(beam, dtype=bool)
    step, tokens, scores, _ = lax.while_loop(cond, body, (1, tokens, scores, done))
    best = jnp.argmax(scores)
    return tokens[best], scores[best], step


# samples/edit_distance.py


def edit_distance_lax(a, b, len_a, len_b):
    """The full dynamic-programming table, filled by two nested `fori_loop`s of traced bounds."""
    d = jnp.zeros((a.shape[0] + 1, b.shape[0] + 1), dtype=jnp.int32)
    # The first column and row in full: the entries past the lengths are never read.
    d = d.at[:, 0].set(jnp.arange(a.shape[0] + 1)).at[0, :].set(jnp.arange(b.shape[0] + 1))

    def row(i, d):
        def cell(j, d):
            cost = jnp.where(a[i - 1] == b[j - 1], 0, 1)
            best = jnp.minimum(d[i - 1, j] + 1, d[i, j - 1] + 1)
            return d.at[i, j].set(jnp.minimum(best, d[i - 1, j - 1] + cost))

        return lax.fori_loop(1, len_b + 1, cell, d)

    return lax.fori_loop(1, len_a + 1, row, d)[len_a, len_b]


def edit_distance_rows_lax(a, b, len_a, len_b):
    """One row of the table: a `fori_loop` of traced bound over rows, each a `fori_loop` over
    the padded width."""
    width = b.shape[0]

    def row(i, prev):
        def cell(j, cur):
            cost = jnp.where(a[i - 1] == b[j - 1], 0, 1)
            best = jnp.minimum(jnp.minimum(prev[j] + 1, cur[j - 1] + 1), prev[j - 1] + cost)
            return cur.at[j].set(best)

        return lax.fori_loop(1, width + 1, cell, jnp.zeros_like(prev).at[0].set(i))

    return lax.fori_loop(1, len_a + 1, row, jnp.arange(width + 1))[len_b]


def edit_distances_lax(a, b, len_a, len_b):
    """`edit_distance_lax` of each pair of rows, with `jax.vmap`."""
    return jax.vmap(edit_distance_lax)(a, b, len_a, len_b)


# samples/kmeans.py


def kmeans_lax(points, centroids, max_iter=20):
    """Lloyd iterations: a `while_loop` until no label changes; an empty cluster keeps its
    centroid (`jnp.where`, the division by its zero count discarded)."""
    k = centroids.shape[0]

    def cond(state):
        _, _, changed, it = state
        return jnp.logical_and(changed, it < max_iter)

    def body(state):
        centroids, labels, _, it = state
        members = labels[:, None] == jnp.arange(k)  # (points, clusters)
        counts = jnp.sum(members, axis=0)
        sums = jnp.sum(points[:, None, :] * members[:, :, None], axis=0)
        centroids = jnp.where(counts[:, None] > 0, sums / counts[:, None], centroids)
        new_labels = assign(points, centroids)
        return centroids, new_labels, jnp.any(new_labels != labels), it + 1

    state = (centroids, assign(points, centroids), True, 0)
    centroids, labels, _, it = lax.while_loop(cond, body, state)
    return centroids, labels, it


# samples/loss_scaling.py


def train_lax(params, x, y, steps, dtype, lr=0.1, growth_interval=10, max_scale=2.0**24):
    """Dynamic loss scaling: a `fori_loop` over the steps; the update, the scale's growth and
    the skip chosen with `jnp.where`."""

    def body(_, state):
        params, scale, good_steps, skipped = state
        grads = jax.grad(scaled_loss)(params, x, y, dtype, scale)
        grads = jax.tree.map(lambda g: g.astype(jnp.float32) / scale, grads)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        params = jax.tree.map(lambda w, g: jnp.where(finite, w - lr * g, w), params, grads)
        good_steps = jnp.where(finite, good_steps + 1, 0)
        grow = finite & (good_steps == growth_interval) & (scale < max_scale)
        scale = jnp.where(grow, scale * 2.0, jnp.where(finite, scale, scale / 2.0))
        good_steps = jnp.where(grow, 0, good_steps)
        return params, scale, good_steps, skipped + jnp.where(finite, 0, 1)

    state = (params, jnp.float32(2.0**24), 0, 0)
    params, scale, _, skipped = lax.fori_loop(0, steps, body, state)
    return params, scale, skipped


# samples/mandelbrot.py


def escape_time_lax(c, max_iter=30):
    """Iterations of `z = z*z + c` while |z| <= 2: a `while_loop`."""

    def cond(state):
        z, n = state
        return jnp.logical_and(jnp.abs(z) <= 2, n < max_iter)

    _, n = lax.while_loop(cond, lambda s: (s[0] * s[0] + c, s[1] + 1), (jnp.zeros_like(c), 0))
    return n


def escape_times_lax(cs, max_iter=30):
    """`escape_time_lax` of every point of `cs`, with `jax.vmap`."""
    flat = jax.vmap(escape_time_lax, in_axes=(0, None))(cs.reshape(-1), max_iter)
    return flat.reshape(cs.shape)


# samples/metropolis.py


def metropolis_lax(key, x0, n, step=1.0):
    """Random-walk Metropolis: a `scan` of `n` steps whose outputs are the samples."""

    def body(state, _):
        key, x, log_p, accepted = state
        key, k_proposal, k_accept = jax.random.split(key, 3)
        proposal = x + step * jax.random.normal(k_proposal, x.shape)
        log_p_proposal = log_density(proposal)
        accept = jnp.log(jax.random.uniform(k_accept)) < log_p_proposal - log_p
        x = jnp.where(accept, proposal, x)
        log_p = jnp.where(accept, log_p_proposal, log_p)
        return (key, x, log_p, accepted + jnp.where(accept, 1, 0)), x

    state = (key, x0, log_density(x0), 0)
    (_, _, _, accepted), samples = lax.scan(body, state, length=n)
    return samples, accepted / n


# samples/mlp_early_stopping.py


def fit_lax(model, x, y, tol=1e-3, max_steps=120, patience=10, lr=0.05):
    """Adam on an Equinox MLP: a `while_loop` on the loss, the step count and the steps without
    improvement (the sample's `break`); the best model kept with `jnp.where`."""
    optimizer = optax.adam(lr)
    params, static = eqx.partition(model, eqx.is_array)

    def cond(state):
        _, _, loss, _, _, bad_steps, step = state
        return (loss > tol) & (step < max_steps) & (bad_steps < patience)

    def body(state):
        params, opt_state, _, best, best_loss, bad_steps, step = state
        loss, grads = eqx.filter_value_and_grad(mse)(eqx.combine(params, static), x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = eqx.apply_updates(params, updates)
        better = loss < best_loss
        best = jax.tree.map(lambda new, old: jnp.where(better, new, old), params, best)
        best_loss = jnp.where(better, loss, best_loss)
        bad_steps = jnp.where(better, 0, bad_steps + 1)
        return params, opt_state, loss, best, best_loss, bad_steps, step + 1

    loss = mse(model, x, y)
    state = (params, optimizer.init(params), loss, params, loss, 0, 0)
    _, _, _, best, best_loss, _, step = lax.while_loop(cond, body, state)
    return eqx.combine(best, static), best_loss, step


def fit_on_arrays(fit, model):
    """`fit` as a function of the model's arrays, which `jax.jit` traces, returning arrays (as
    the sample's `fit_params`)."""
    static = eqx.partition(model, eqx.is_array)[1]

    def fit_arrays(params, x, y):
        best, best_loss, steps = fit(eqx.combine(params, static), x, y)
        return eqx.filter(best, eqx.is_array), best_loss, steps

    return fit_arrays


# samples/nnx_layers.py


def deep_net_lax(model, x):
    """The sample's `DeepNet.__call__`: the layer loop unrolled (a Python list), the residual
    choice with `jnp.where`, the `break` a mask that keeps `h` once its norm is small."""
    h = x
    stopped = jnp.bool_(False)
    for layer in model.layers:
        z = jnp.tanh(layer(h))
        h = jnp.where(stopped, h, jnp.where(jnp.mean(h) > model.threshold, h + z, 0.5 * z))
        stopped = stopped | (jnp.linalg.norm(h) < model.tol)
    return model.head(h)[0]


def loss_lax(model, x, y):
    return (deep_net_lax(model, x) - y) ** 2


def value_and_grads(loss, graphdef):
    """The sample's training step as a function of the model's state: loss and gradients."""

    def step(state, x):
        return nnx.value_and_grad(loss)(nnx.merge(graphdef, state), x, 1.0)

    return step
