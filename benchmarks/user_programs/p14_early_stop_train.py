import jax
import jax.numpy as jnp
from jax import lax


def loss_fn(w, x, y):
    return jnp.mean((jnp.tanh(x @ w) - y) ** 2)


def f(w, x, y):
    best = jnp.inf
    best_w = w
    bad = 0
    lr = 0.5
    for epoch in range(300):
        loss, g = jax.value_and_grad(loss_fn)(w, x, y)
        w = w - lr * g
        if loss < best - 1e-4:
            best = loss
            best_w = w
            bad = 0
        else:
            bad += 1
        if bad >= 5:
            break
    return best_w, best, epoch


def f_lax(w, x, y):
    def cond(s):
        epoch, w, best, best_w, bad = s
        return (epoch < 300) & (bad < 5)

    def body(s):
        epoch, w, best, best_w, bad = s
        loss, g = jax.value_and_grad(loss_fn)(w, x, y)
        w = w - 0.5 * g
        imp = loss < best - 1e-4
        return (
            epoch + 1,
            w,
            jnp.where(imp, loss, best),
            jnp.where(imp, w, best_w),
            jnp.where(imp, 0, bad + 1),
        )

    epoch, w, best, best_w, bad = lax.while_loop(cond, body, (0, w, jnp.float32(jnp.inf), w, 0))
    return best_w, best, epoch - 1


def make_args():
    k = jax.random.split(jax.random.PRNGKey(14), 3)
    x = jax.random.normal(k[0], (64, 8))
    wt = jax.random.normal(k[1], (8, 4))
    y = jnp.tanh(x @ wt) + 0.3 * jax.random.normal(k[2], (64, 4))
    return jnp.zeros((8, 4)), x, y


TOL = (1e-4, 1e-5)
