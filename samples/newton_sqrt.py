"""Newton's method for a square root: a while loop that runs until a traced value converges."""

import jax.numpy as jnp


def newton_sqrt(a, tol=1e-6):
    """sqrt(a) by Newton's method; the number of iterations depends on `a`."""
    x = a
    converged = False
    steps = 0
    while not converged:
        x_next = 0.5 * (x + a / x)
        converged = jnp.abs(x_next - x) < tol * x_next
        x = x_next
        steps += 1
    return x, steps


def main():
    from samples.common import run

    print("Newton's method for sqrt(10), until a step changes x by less than tol * x:")
    (x, steps), _ = run(newton_sqrt, 10.0)
    print(f"  sqrt(10) = {float(x):.6f} after {int(steps)} steps (10 ** 0.5 = {10**0.5:.6f})")


if __name__ == "__main__":
    main()
