"""Converted code on more than one device (the CPU split in two, in a process of its own)."""

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding, PartitionSpec
    import transpiler

    def checked(x):
        assert jnp.sum(x) > 0, "negative"
        for i in range(2):
            if x[0] > i:
                x = x - 1
        return x * 2

    print(jax.pmap(transpiler.convert(checked))(jnp.arange(1.0, 5.0).reshape(2, 2)).tolist())
    mesh = jax.make_mesh((2,), ("d",), axis_types=(AxisType.Auto,))
    x = jax.device_put(jnp.arange(1.0, 5.0), NamedSharding(mesh, PartitionSpec("d")))
    print(jax.jit(transpiler.convert(checked))(x).tolist())
    """
)


def test_checks_of_a_function_that_does_not_print_run_on_several_devices(tmp_path):
    # Ordered checks (what a function that prints gets) are refused by JAX on more than one
    # device: a function without prints keeps unordered ones.
    program = tmp_path / "on_two_devices.py"  # (converting reads the function's source file)
    program.write_text(PROGRAM)
    done = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["[[0.0, 2.0], [2.0, 4.0]]", "[0.0, 2.0, 4.0, 6.0]"]
