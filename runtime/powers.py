"""Powers as Python computes them: `base ** exponent` and `pow(base, exponent[, mod])`.

Generated code calls `pow_` for `**`, `**=` and `pow()` (see `transpiler.passes.powers`), and
`lists.list_update` for `items[i] **= e`.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np

from runtime import errors, staging
from runtime.errors import Site, StagingError
from runtime.staging import is_staged


def pow_(base, exponent, mod=None):
    """`base ** exponent` and `pow(base, exponent[, mod])`, as Python computes them.

    A power of two Python ints is an int for an exponent >= 0 and a float for a negative one;
    JAX's power of two ints is an int either way (`2 ** -3` is 0). Where both stand for Python
    ints (Python ints, or weakly typed int scalars: what a Python int became in staged code) and
    one is traced: a negative Python exponent makes the power a float's, as Python's; a traced
    exponent, whose sign decides the type, is checked >= 0 when the program runs.
    """
    if mod is not None:
        if any(is_staged(v) for v in (base, exponent, mod)):
            raise StagingError(
                f"pow(base, exponent, mod) of traced values ({Site('pow()')}) is not staged: "
                "Python computes it with unbounded ints (a negative exponent: the modular "
                "inverse). Write (base ** exponent) % mod where the power fits an int32."
            )
        return errors.python_call(builtins.pow, base, exponent, mod)
    traced = isinstance(base, jax.core.Tracer) or isinstance(exponent, jax.core.Tracer)
    if not traced:
        return base**exponent
    if not (_python_int(base) and _python_int(exponent)):
        if _by_a_counter(base, exponent):
            return _integer_power(base, exponent)
        if is_staged(exponent) and _integer(base) and _integer(exponent):
            # Eager JAX (and NumPy) raise for a negative one; XLA's power of ints gives 0.
            staging.check_when_run(
                lambda exponent: exponent < 0,
                lambda _: TypeError("Integers cannot be raised to negative powers"),
                exponent,
            )
        return base**exponent
    if not is_staged(exponent):  # known now: Python's type for its sign
        if exponent < 0:
            return (base * 1.0) ** exponent  # a weakly typed float, as a Python float staged
        return base**exponent
    _check_int_exponent(exponent, Site("** of ints"))
    # a Python int, weakly typed (jnp.power's is an int32, which a staged loop would then carry
    # as an int32 array, no longer checked)
    return staging.python_number(base**exponent)


def jnp_power(base, exponent, /):
    """What converted code calls for `jnp.power(base, exponent)`: with an int exponent Python
    knows, `jnp.power` computes an `integer_pow`; with a staged counter (`jnp.power(x, k)` in a
    staged loop over `k`), the same derivatives (see `_integer_power`)."""
    if _by_a_counter(base, exponent):
        return _integer_power(base, exponent)
    return jnp.power(base, exponent)


def _by_a_counter(base, exponent) -> bool:
    """Whether this is a power of a float by a traced int (a staged loop's counter), which
    `_integer_power` computes."""
    return is_staged(exponent) and _integer(exponent) and _inexact(base)


@jax.custom_jvp
def _integer_power(base, exponent):
    """`base ** exponent` of a float by a traced int, with the derivative Python's power by an
    int has (a loop's counter is a Python int where the loop runs as Python: `x ** k` is
    JAX's `integer_pow` there): `k * x ** (k - 1)`, and 0 for `k == 0`. JAX's power by a traced
    exponent computes its derivative as a select whose other side, `0 * x ** -1`, is NaN at
    `x == 0` in the second derivative (`jax.hessian` of `sum(x ** k for k in range(3))`)."""
    return base**exponent


@_integer_power.defjvp
def _integer_power_jvp(primals, tangents):
    base, exponent = primals
    d_base, _ = tangents
    # (`k * x ** (k - 1)` is the same power again, by an exponent one less but never -1 for
    # `k == 0`, where its factor `k` is 0: every higher derivative stays finite where Python's
    # does.)
    lower = jnp.where(exponent == 0, jnp.zeros_like(exponent), exponent - 1)
    power = _integer_power(base, exponent)
    slope = _integer_power(base, lower) * exponent.astype(jnp.result_type(power))
    return power, slope * d_base


def _inexact(value) -> bool:
    """Whether `value` is a float or complex of any kind: Python's, NumPy's, an array."""
    return jnp.issubdtype(jnp.result_type(value), jnp.inexact)


def _integer(value) -> bool:
    """Whether `value` is an int (or bool) of any kind: Python's, NumPy's, an int array."""
    dtype = jnp.result_type(value)
    return jnp.issubdtype(dtype, jnp.integer) or dtype == jnp.bool_


def _python_int(value) -> bool:
    """Whether `value` stands for a Python int: one, or a weakly typed int scalar."""
    if type(value) in (int, bool):
        return True
    if not isinstance(value, jax.core.Tracer) or value.ndim != 0 or not value.aval.weak_type:
        return False
    return jnp.issubdtype(value.dtype, jnp.integer) or value.dtype == jnp.bool_


def _check_int_exponent(exponent, site: Site) -> None:
    """A check, when the program runs, that a traced int exponent of an int is not negative."""
    where = str(site)
    staging.check_when_run(
        lambda exponent: exponent < 0,
        lambda exponent: StagingError(
            f"a power of two ints with the exponent {np.min(exponent)} ({where}): Python's "
            "is a float there, the staged one an int (JAX's power of ints). Make the base a "
            "float (2.0 ** k)."
        ),
        exponent,
    )
