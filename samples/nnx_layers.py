"""A Flax NNX model whose `__call__` branches on the data and leaves its layer loop early.

`for layer in self.layers:` walks a Python list of `nnx.Linear` layers (Python's loop, unrolled
as Python would); inside it, `if jnp.mean(h) > self.threshold:` picks a residual or a plain
update (a traced `if`), and `if jnp.linalg.norm(h) < self.tol: break` leaves the loop once the
activation is small — a `break` on a traced condition, which the converter stages: the layers
after it are computed and masked, exactly as if they had not run. `nnx.jit` and
`nnx.value_and_grad` work on the converted model.
"""

import jax
import jax.numpy as jnp

try:
    from flax import nnx
except ImportError:  # flax is in the `integrations` extra
    nnx = None


def make_model(seed=0, width=8, depth=4, threshold=0.0, tol=0.5):
    class DeepNet(nnx.Module):
        def __init__(self, rngs):
            self.layers = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(depth)])
            self.head = nnx.Linear(width, 1, rngs=rngs)
            self.threshold, self.tol = threshold, tol

        def __call__(self, x):
            h = x
            for layer in self.layers:
                if jnp.mean(h) > self.threshold:
                    h = h + jnp.tanh(layer(h))  # residual
                else:
                    h = 0.5 * jnp.tanh(layer(h))
                if jnp.linalg.norm(h) < self.tol:
                    break
            return self.head(h)[0]

    return DeepNet(nnx.Rngs(seed))


def loss(model, x, y):
    return (model(x) - y) ** 2


def main():
    import time

    import transpiler

    print("== samples/nnx_layers.py: Flax NNX, a traced if and a traced break over layers ==")
    if nnx is None:
        print("  flax is not installed: pip install -e '.[integrations]'")
        return
    model = make_model()
    fast = transpiler.convert(model)
    xs = [jnp.linspace(-1.0, 1.0, 8), -0.05 * jnp.ones(8), jnp.ones(8)]
    step = nnx.jit(lambda m, x: nnx.value_and_grad(loss)(m, x, 1.0))
    for x in xs:
        t0 = time.perf_counter()
        value, grads = step(fast, x)
        first = time.perf_counter() - t0
        eager_value, eager_grads = nnx.value_and_grad(loss)(model, x, 1.0)
        ok = jnp.allclose(value, eager_value, rtol=1e-5) and all(
            jnp.allclose(a, b, rtol=1e-4, atol=1e-6)
            for a, b in zip(
                jax.tree.leaves(nnx.state(grads)), jax.tree.leaves(nnx.state(eager_grads))
            )
        )
        print(
            f"  x = {x[:2].tolist()}...: loss {float(value):.5f} (eager {float(eager_value):.5f}), "
            f"gradients {'equal' if ok else 'DIFFERENT'}; first call {first * 1e3:.0f} ms"
        )
        if not ok:
            raise AssertionError("the converted model's loss or gradients differ from eager")
    graphdef, state = nnx.split(fast)

    def forward(state, x):
        return nnx.merge(graphdef, state)(x)

    print("  " + transpiler.graph(forward)(state, xs[0]).summary().line())


if __name__ == "__main__":
    main()
