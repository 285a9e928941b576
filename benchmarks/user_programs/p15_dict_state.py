import jax
import jax.numpy as jnp
from jax import lax


def f(pos, vel, steps):
    state = {"pos": pos, "vel": vel, "bounces": jnp.zeros(pos.shape[0], jnp.int32), "t": 0.0}
    dt = 0.01
    for _ in range(steps):
        state["vel"] = state["vel"] + dt * jnp.array([0.0, -9.8])
        state["pos"] = state["pos"] + dt * state["vel"]
        if jnp.any(state["pos"][:, 1] < 0):
            hit = state["pos"][:, 1] < 0
            state["vel"] = (
                state["vel"]
                .at[:, 1]
                .set(jnp.where(hit, -0.9 * state["vel"][:, 1], state["vel"][:, 1]))
            )
            state["pos"] = state["pos"].at[:, 1].set(jnp.abs(state["pos"][:, 1]))
            state["bounces"] = state["bounces"] + hit
        state["t"] = state["t"] + dt
    return state


def f_lax(pos, vel, steps):
    def body(i, s):
        vel = s["vel"] + 0.01 * jnp.array([0.0, -9.8])
        pos = s["pos"] + 0.01 * vel
        hit = pos[:, 1] < 0
        vel = vel.at[:, 1].set(jnp.where(hit, -0.9 * vel[:, 1], vel[:, 1]))
        pos = pos.at[:, 1].set(jnp.abs(pos[:, 1]))
        return {"pos": pos, "vel": vel, "bounces": s["bounces"] + hit, "t": s["t"] + 0.01}

    s = {
        "pos": pos,
        "vel": vel,
        "bounces": jnp.zeros(pos.shape[0], jnp.int32),
        "t": jnp.float32(0.0),
    }
    return lax.fori_loop(0, steps, body, s)


def make_args():
    k = jax.random.split(jax.random.PRNGKey(15), 2)
    pos = jax.random.uniform(k[0], (32, 2)) * 2
    vel = jax.random.normal(k[1], (32, 2))
    return pos, vel, 400


TOL = (1e-4, 1e-4)
