"""An adaptive-step ODE integrator: the Heun-Euler embedded pair with step rejection.

Each step takes an Euler and a Heun (trapezoidal) step of size `h` and compares them. If their
difference is within the tolerance the step is accepted (`t` and `y` advance), otherwise it is
rejected; either way `h` is adapted to the error. The `while t < t_end and steps < max_steps:`
runs a number of steps that depends on the data, with an `if` on the traced error inside.
Converted, the `while` is one `lax.while_loop` and the `if` a `lax.cond` (or select) in it;
`jax.grad` of the final state by the damping goes through the loop in reverse, the transpiler
checkpointing it since its trip count is unknown when the program compiles.
"""

import jax
import jax.numpy as jnp

from samples.common import run


def damped_oscillator(y, damping, stiffness=4.0):
    """dy/dt of x'' + damping x' + stiffness x = 0, with y = (x, x')."""
    x, v = y[0], y[1]
    return jnp.stack([v, -stiffness * x - damping * v])


def integrate(y0, t_end, damping, h=0.5, tol=1e-2, max_steps=500):
    """Integrates the oscillator from t = 0 to `t_end`; returns y, t and the step counts."""
    y = y0
    t = 0.0
    steps = 0
    accepted = 0
    rejected = 0
    while t < t_end and steps < max_steps:
        h = min(h, t_end - t)
        k1 = damped_oscillator(y, damping)
        y_euler = y + h * k1
        k2 = damped_oscillator(y_euler, damping)
        y_heun = y + 0.5 * h * (k1 + k2)
        err = jnp.max(jnp.abs(y_heun - y_euler))
        if err <= tol:
            t = t + h
            y = y_heun
            accepted += 1
        else:
            rejected += 1
        # Second-order error estimate: scale h by (tol / err) ** (1/2), within [0.2, 5].
        factor = 0.9 * jnp.sqrt(tol / (err + 1e-12))
        h = h * min(max(factor, 0.2), 5.0)
        steps += 1
    return y, t, accepted, rejected


def final_position(damping, y0, t_end):
    """x(t_end): what `jax.grad` differentiates by the damping."""
    y, _, _, _ = integrate(y0, t_end, damping)
    return y[0]


def position_gradient(damping, y0, t_end):
    """d x(t_end) / d damping."""
    return jax.grad(final_position)(damping, y0, t_end)


def exact_position(t, damping, stiffness=4.0):
    """The closed-form x(t) for x(0) = 1, x'(0) = 0 (underdamped), to check the integration."""
    omega = jnp.sqrt(stiffness - damping**2 / 4)
    decay = jnp.exp(-damping * t / 2)
    return decay * (jnp.cos(omega * t) + damping / (2 * omega) * jnp.sin(omega * t))


def main():
    y0 = jnp.array([1.0, 0.0])
    t_end = jnp.float32(3.0)
    damping = jnp.float32(0.5)
    print("Heun-Euler adaptive integration of x'' + 0.5 x' + 4 x = 0, x(0) = 1, to t = 3")
    (y, t, accepted, rejected), _ = run(integrate, y0, t_end, damping)
    print(f"  y(3) = ({float(y[0]):.5f}, {float(y[1]):.5f}) at t = {float(t):.4f}")
    print(f"  exact x(3) = {float(exact_position(t_end, damping)):.5f}")
    print(f"  {int(accepted)} steps accepted, {int(rejected)} rejected")
    print("d x(3) / d damping, reverse mode through the while loop:")
    eager, compiled = run(position_gradient, damping, y0, t_end)
    exact = jax.grad(exact_position, argnums=1)(t_end, damping)
    print(f"  {float(compiled):.5f} (eager {float(eager):.5f}; exact {float(exact):.5f})")


if __name__ == "__main__":
    main()
