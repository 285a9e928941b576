"""Shared test settings: small shapes, CPU, deterministic.

Called eagerly (no `jit`, `grad` or `vmap` tracing), a converted function runs the original:
that is Python's semantics by construction. The converted code must have them too (`jax.grad`
without `jax.jit` runs it on values it can still decide), so tests run it there, except those
marked `python_path`, which test the eager shortcut itself.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402 - after the platform is chosen


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "python_path: run with the eager shortcut (converted code not run eagerly)"
    )


@pytest.fixture(autouse=True)
def _converted_code_on_python_values(request):
    if request.node.get_closest_marker("python_path") is not None:
        yield
        return
    from transpiler import _runtime_bridge

    with _runtime_bridge.converted_code_on_python_values():
        yield
