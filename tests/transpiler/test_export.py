"""transpiler.export / load: artifacts that run without the Python source, refused when damaged."""

import ast
import hashlib
import json
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import transpiler
from transpiler import exporting
from transpiler.origins import display_path

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
HERE = display_path(__file__)
SOURCE = open(__file__).read().splitlines()


def line(marker: str) -> str:
    found = [i + 1 for i, text in enumerate(SOURCE) if text.endswith(f"# {marker}")]
    assert len(found) == 1, marker
    return f"{HERE}:{found[0]}"


def clipped_steps(x, n):
    i = 0
    while jnp.max(jnp.abs(x)) < 10.0 and i < n:
        if jnp.sum(x) > 0:
            x = x * 1.5
        else:
            x = x - 0.5
        i += 1
    return x, i


def noisy(x):
    if jnp.sum(x) > 0:
        print("positive", x)  # PRINT
    assert jnp.all(x < 100), "too big"  # ASSERT
    return x * 2


def refusing(x):
    if jnp.sum(x) > 100:  # RAISE IF
        raise ValueError("too big")
    return x + 1


def calls_back(x):
    jax.debug.print("x = {}", x)  # CALLBACK
    return x


MODEL = """
import jax.numpy as jnp


def step(x, n):
    i = 0
    while jnp.sum(x) < 50.0 and i < n:
        if x[0] > 0:
            x = x * 2.0
        else:
            x = x - 1.0
        i += 1
    return x, i
"""


@pytest.fixture(scope="module")
def artifact():
    specs = (jax.ShapeDtypeStruct((3,), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))
    return transpiler.export(clipped_steps, *specs, description="clipped steps")


def test_an_artifact_runs_as_the_converted_function_does(artifact):
    loaded = transpiler.load(bytes(artifact))
    for x, n in [([1.0, 2.0, 0.5], 20), ([-1.0, 0.0, 0.5], 3), ([0.0, 0.0, 0.0], 0)]:
        x = jnp.asarray(x, jnp.float32)
        expected = clipped_steps(np.asarray(x), n)  # plain Python
        got = loaded(x, jnp.int32(n))
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        assert int(got[1]) == expected[1]


def test_an_artifact_describes_itself(artifact, tmp_path):
    path = tmp_path / "f.bin"
    artifact.save(path)
    loaded = transpiler.load(path)
    assert loaded.in_specs == (
        jax.ShapeDtypeStruct((3,), jnp.float32),
        jax.ShapeDtypeStruct((), jnp.int32),
    )
    assert loaded.out_specs == (
        jax.ShapeDtypeStruct((3,), jnp.float32),
        jax.ShapeDtypeStruct((), jnp.int32),
    )
    assert loaded.description == "clipped steps"
    assert loaded.platforms == (jax.default_backend(),)
    assert loaded.header["function"] == "clipped_steps"
    assert loaded.header["in_specs"] == [
        {"shape": [3], "dtype": "float32"},
        {"shape": [], "dtype": "int32"},
    ]
    assert bytes(loaded) == bytes(artifact) == path.read_bytes()


def test_an_artifact_for_cpu_and_cuda_runs_here(artifact):
    both = transpiler.export(clipped_steps, jnp.ones(3), 4, platforms=("cpu", "cuda"))
    assert transpiler.load(bytes(both)).platforms == ("cpu", "cuda")
    np.testing.assert_allclose(both(jnp.ones(3), 4)[0], clipped_steps(np.ones(3), 4)[0])


def test_an_artifact_runs_in_a_fresh_process_without_the_source(tmp_path):
    source_dir, run_dir = tmp_path / "src", tmp_path / "run"
    source_dir.mkdir()
    run_dir.mkdir()
    (source_dir / "model.py").write_text(MODEL)
    sys.path.insert(0, str(source_dir))
    try:
        import model
    finally:
        sys.path.remove(str(source_dir))
        sys.modules.pop("model", None)
    x = jnp.asarray([1.0, -2.0, 3.0], jnp.float32)
    expected = jax.jit(transpiler.convert(model.step))(x, 6)
    transpiler.export(model.step, x, 6).save(run_dir / "step.bin")
    script = textwrap.dedent(
        f"""
        import json, sys
        assert not any({str(source_dir)!r} in p for p in sys.path), sys.path
        try:
            import model
        except ImportError:
            pass
        else:
            raise AssertionError("the source is reachable")
        import jax.numpy as jnp
        import transpiler
        step = transpiler.load("step.bin")
        x, i = step(jnp.asarray([1.0, -2.0, 3.0], jnp.float32), jnp.int32(6))
        print(json.dumps([x.tolist(), int(i)]))
        """
    )
    env = {"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=run_dir, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    x_out, i_out = json.loads(done.stdout)
    assert x_out == expected[0].tolist() and i_out == int(expected[1])


def test_truncated_damaged_and_foreign_files_are_refused(artifact, tmp_path):
    data = bytes(artifact)
    header_length = int.from_bytes(data[10:14], "big")
    total = len(data)
    path = tmp_path / "cut.bin"
    path.write_bytes(data[:-10])
    cases = {
        str(path): f"{path} is truncated: its prefix announces {total} bytes, it has {total - 10}",
        data[:20]: "the data is truncated: it is 20 bytes, shorter than the 54-byte prefix "
        "every artifact starts with",
        data + b"\0": f"the data has 1 bytes after its end ({total} bytes announced): it is "
        "damaged, or not one artifact",
        b"": "the data is empty: an artifact starts with b'ASTGRAPH'",
        b"PK\x03\x04 a zip file": "the data is not an astgraph artifact: it does not start "
        "with b'ASTGRAPH' (transpiler.export(...).save(path) writes them)",
        data[:8] + b"\x00\x07" + data[10:]: "the data is in artifact format 7; this version "
        "of astgraph reads format 1. Export the function again with this version.",
    }
    flipped = bytearray(data)
    flipped[54 + header_length + 100] ^= 0x01  # one bit of the program
    cases[bytes(flipped)] = (
        "the data is damaged or was changed after export: its contents do not match the "
        "SHA-256 it was written with"
    )
    cases[exporting.pack(["not", "an", "object"], data[54 + header_length :])] = (
        "the data has a malformed header: a JSON list, not an object"
    )
    cases[str(tmp_path)] = f"{tmp_path} is a directory, not an artifact file"
    for given, message in cases.items():
        with pytest.raises(transpiler.ArtifactError) as e:
            transpiler.load(given)
        assert str(e.value) == message


def test_the_hash_finds_damage_not_a_deliberate_edit_and_loading_runs_only_the_program(artifact):
    # An edit that redoes the SHA-256 passes the check (docs/graphs.md says so): the hash is
    # against damage. Loading still runs nothing but the payload's program.
    data = bytes(artifact)
    header_length = int.from_bytes(data[10:14], "big")
    header = json.loads(data[54 : 54 + header_length])
    header["description"] = "edited"
    edited = exporting.pack(header, data[54 + header_length :])
    assert hashlib.sha256(edited[54:]).digest() == edited[22:54]
    loaded = transpiler.load(edited)
    assert loaded.description == "edited"
    np.testing.assert_allclose(loaded(jnp.ones(3), 2)[0], clipped_steps(np.ones(3), 2)[0])


def test_loading_reads_no_pickle():
    tree = ast.parse((ROOT / "transpiler" / "exporting.py").read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {"pickle", "cloudpickle", "dill", "marshal"} & imported


def test_staged_prints_and_asserts_are_named_with_their_lines():
    with pytest.raises(transpiler.ExportError) as e:
        transpiler.export(noisy, jnp.ones(3))
    assert str(e.value) == (
        "cannot export 'noisy': JAX cannot serialize host callbacks, and its staged program "
        "makes these:\n"
        f"  {line('PRINT')}: a staged print\n"
        f"  {line('ASSERT')}: a staged assert\n"
        'Pass prints="drop" to export it without its prints.\n'
        'Asserts, raises and checks are part of what the program computes: checks="drop" '
        "exports it without them, and then inputs that would fail them give results instead "
        "of an error."
    )
    with pytest.raises(transpiler.ExportError) as e:  # the prints alone are not enough
        transpiler.export(noisy, jnp.ones(3), prints="drop")
    assert f"  {line('ASSERT')}: a staged assert\n" in str(e.value)
    assert "print" not in str(e.value).split("\n")[1]


def test_exported_without_prints_and_checks_it_computes_the_same(capsys):
    quiet = transpiler.export(noisy, jnp.ones(3), prints="drop", checks="drop")
    np.testing.assert_allclose(quiet(jnp.ones(3)), noisy(np.ones(3)))
    assert capsys.readouterr().out == "positive [1. 1. 1.]\n"  # the eager call printed, not it
    assert quiet.header["dropped"] == ["assert", "check", "print", "raise"]


def test_a_raise_in_a_staged_branch_is_named_and_dropped_only_on_request():
    with pytest.raises(transpiler.ExportError) as e:
        transpiler.export(refusing, jnp.ones(3))
    assert f"  {line('RAISE IF')}: a raise in a branch of this staged if\n" in str(e.value)
    unchecked = transpiler.export(refusing, jnp.ones(3), checks="drop")
    big = jnp.full(3, 50.0)
    with pytest.raises(Exception, match="too big"):  # the converted function raises
        jax.jit(transpiler.convert(refusing))(big).block_until_ready()
    np.testing.assert_allclose(unchecked(big), big + 1)  # the artifact computes on


def test_a_callback_of_the_user_s_own_is_named():
    with pytest.raises(transpiler.ExportError) as e:
        transpiler.export(calls_back, jnp.ones(3))
    assert str(e.value) == (
        "cannot export 'calls_back': JAX cannot serialize host callbacks, and its staged "
        f"program makes these:\n  {line('CALLBACK')}: a host callback\n"
        "Remove the callbacks (jax.debug.print, jax.debug.callback) before export."
    )


def test_options_are_checked():
    with pytest.raises(ValueError) as e:
        transpiler.export(clipped_steps, jnp.ones(3), 2, prints="skip")
    assert str(e.value) == 'prints=\'skip\': expected "keep" or "drop"'
    with pytest.raises(ValueError, match="'nope' is not one of JAX's platforms"):
        transpiler.export(clipped_steps, jnp.ones(3), 2, platforms=("cpu", "nope"))
    with pytest.raises(TypeError) as e:
        transpiler.load(42)
    assert str(e.value) == "load() takes a path or bytes, not int: transpiler.load('f.bin')"


def _scaled_or_shifted(x, y):
    if jnp.sum(x) > 0:
        return x * y
    return x - y


def test_symbolic_dimensions_are_exported_and_named_in_the_header(tmp_path):
    (n,) = jax.export.symbolic_shape("n")
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    artifact = transpiler.export(_scaled_or_shifted, spec, spec)
    assert artifact.header["in_specs"] == [{"shape": ["n"], "dtype": "float32"}] * 2
    loaded = transpiler.load(bytes(artifact))
    for size in (2, 5):
        x = jnp.arange(size, dtype=jnp.float32) - 0.5
        np.testing.assert_array_equal(loaded(x, 2 * x), _scaled_or_shifted(x, 2 * x))
    path = tmp_path / "symbolic.bin"
    artifact.save(path)
    from transpiler.__main__ import main

    assert main(["run", str(path)]) == 2  # which shapes? --args says
    assert main(["run", str(path), "--args", "f32[4], f32[4]"]) == 0
