import jax
import jax.numpy as jnp
from jax import lax


def f(x):
    run_max = x[0]
    total = 0.0
    outs = [run_max]
    sums = []
    for i in range(1, x.shape[0]):
        if x[i] > run_max:
            run_max = x[i]
        total = total + x[i]
        outs.append(run_max)
        sums.append(total)
    return jnp.stack(outs), jnp.stack(sums)


def f_lax(x):
    def step(c, xi):
        m, s = c
        m = jnp.maximum(m, xi)
        s = s + xi
        return (m, s), (m, s)

    (_, _), (ms, ss) = lax.scan(step, (x[0], jnp.float32(0.0)), x[1:])
    return jnp.concatenate([x[:1], ms]), ss


def make_args():
    return (jax.random.normal(jax.random.PRNGKey(11), (512,)),)


TOL = (1e-5, 1e-4)
