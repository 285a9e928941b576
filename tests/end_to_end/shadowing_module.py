"""A module whose own functions are named like builtins (for test_builtin_names.py): Python
calls these, not the builtins, from every function here."""

import builtins

import transpiler


def print(*args):  # noqa: A001 - the point: a module-level `print` of the user's
    builtins.print("[log]", *args)


def uses_module_print(x):
    if x > 0:
        print("positive", x)
    return x


def uses_len_defined_below(x):
    if x > 0:
        x = x + 1
    return x + len([1, 2, 3])


converted_before_len = transpiler.convert(uses_len_defined_below)  # as a decorator would


def len(values):  # noqa: A001 - defined after the function above was converted
    return 100


def uses_max_bound_again_below(x):
    if x > 0:
        x = x + 1
    return x + max(1.0, 3.0)


converted_before_builtin_import = transpiler.convert(uses_max_bound_again_below)

from builtins import max  # noqa: E402, UP029 - the builtin itself, bound in the module after


def assigns_a_global_builtin_name(x):
    global sum
    sum = lambda values: -1.0  # noqa: E731
    if x > 0:
        x = x + 1
    return x + sum([1.0, 2.0])
