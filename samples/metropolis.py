"""Metropolis-Hastings sampling of a 2-D density: a mixture of two Gaussians.

`for _ in range(n):` makes `n` proposals, splitting the `jax.random` key in the loop for each
one; `if log_u < log_accept:` (a traced test) accepts the proposal and counts it. Converted, the
loop is one `lax.scan` carrying the key, the state and the counter, the `if` a select in it, and
the list of samples a buffer of `n` rows that `jnp.stack` reads.
"""

import functools

import jax
import jax.numpy as jnp

from samples.common import agree, run

MODES = jnp.array([[-1.5, 0.0], [1.5, 0.5]])


def log_density(x):
    """log of an equal mixture of unit Gaussians at MODES (up to a constant)."""
    return jax.nn.logsumexp(-0.5 * jnp.sum((x - MODES) ** 2, axis=1))


def metropolis(key, x0, n, step=1.0):
    """`n` random-walk Metropolis steps from `x0`; returns the samples and the acceptance rate."""
    x = x0
    log_p = log_density(x)
    accepted = 0
    samples = []
    for _ in range(n):
        key, k_proposal, k_accept = jax.random.split(key, 3)
        proposal = x + step * jax.random.normal(k_proposal, x.shape)
        log_p_proposal = log_density(proposal)
        log_u = jnp.log(jax.random.uniform(k_accept))
        log_accept = log_p_proposal - log_p
        if log_u < log_accept:
            x = proposal
            log_p = log_p_proposal
            accepted += 1
        samples.append(x)
    return jnp.stack(samples), accepted / n


def main():
    key = jax.random.key(0)
    x0 = jnp.zeros(2)
    n = 1000
    print(f"Metropolis-Hastings, {n} steps, on a mixture of Gaussians at {MODES.tolist()}:")
    # A random walk of 1000 float32 steps: XLA's fused arithmetic rounds a few ulps differently.
    check = functools.partial(agree, atol=1e-5)
    (samples, rate), _ = run(metropolis, key, x0, n, check=check, jit_kwargs={"static_argnums": 2})
    mean = jnp.mean(samples, axis=0)
    print(f"  acceptance rate {float(rate):.3f}")
    print(f"  sample mean ({float(mean[0]):.3f}, {float(mean[1]):.3f}), exact (0.000, 0.250)")


if __name__ == "__main__":
    main()
