"""Threads converting and tracing at once get exactly what each would get alone."""

import threading

import jax
import jax.numpy as jnp
import numpy as np

import transpiler


def make_collector(trips):
    def collect(x):
        out = []
        for i in range(trips):  # staged: a scan whose list has `trips` items
            x = x * 0.5 + i
            out.append(x)
        total = 0.0
        k = 0
        while k < x:  # staged: a while loop over a traced bound
            total = total + k
            k += 1
        return jnp.stack(out), total

    return collect


def nested(x, n):
    rows = []
    for i in range(n):
        for j in range(3):
            if (i + j) % 2 == 0:
                x = x + j
            rows.append(x)
    return jnp.stack(rows)


ROUNDS = 15
THREADS = 8


def test_eight_threads_many_rounds_exact():
    failures = []
    barrier = threading.Barrier(THREADS)

    def work(index):
        try:
            barrier.wait()
            for round_ in range(ROUNDS):
                trips = 2 + (index + round_) % 5
                collect = make_collector(trips)  # a new closure: converted again each round
                converted = transpiler.convert(collect)
                x = np.float32(index + 1)
                expected = collect(x)
                # The Python path, then a trace: the list's length is this thread's own.
                python = converted(x)
                np.testing.assert_allclose(python[0], expected[0], rtol=1e-6)
                closed = jax.make_jaxpr(converted)(x)
                staged = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, x)
                assert staged[0].shape == (trips,), (index, round_, staged[0].shape)
                np.testing.assert_allclose(staged[0], expected[0], rtol=1e-6)
                np.testing.assert_allclose(staged[1], expected[1], rtol=1e-6)
                if round_ % 10 == 0:
                    n = 1 + index % 3
                    got = jax.jit(transpiler.convert(nested), static_argnums=1)(x, n)
                    np.testing.assert_allclose(got, nested(x, n), rtol=1e-6)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append((index, repr(e)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
