"""Export a converted function as an artifact that runs without its Python source.

`export(fn, *args_or_specs)` stages `fn` with `jax.export` (StableHLO inside) and wraps JAX's
serialization in a small container that a damaged or truncated file cannot get past:

    offset  size  what
    0       8     b"ASTGRAPH"
    8       2     format version (1), big-endian
    10      4     header length H
    14      8     payload length P
    22      32    SHA-256 of header + payload
    54      H     header: JSON (function name, description, input/output specs, platforms, ...)
    54 + H  P     payload: `jax.export.Exported.serialize()` (a flatbuffer)

Nothing in it is pickled: `load` checks the container, then hands the payload to
`jax.export.deserialize`, which reads data, never code.

    artifact = transpiler.export(f, jax.ShapeDtypeStruct((8,), jnp.float32))
    artifact.save("f.bin")
    g = transpiler.load("f.bin")          # in another process, without f's source
    g(jnp.ones(8)) == f(jnp.ones(8))
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Sequence

MAGIC = b"ASTGRAPH"
FORMAT_VERSION = 1
_PREFIX = struct.Struct(">8sHIQ32s")  # magic, version, header length, payload length, SHA-256


class ExportError(Exception):
    """A function cannot be exported as written (host callbacks JAX cannot serialize)."""


class ArtifactError(ValueError):
    """Bytes or a file that `load` refuses: not an artifact, truncated, damaged or too new."""


_CHECKS = ("assert", "raise", "check")


PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
"""The platforms an artifact may name (`jax.export`'s lowering platforms)."""


def export(
    fn: Callable,
    *args_or_specs,
    platforms: Sequence[str] | None = None,
    prints: str = "keep",
    checks: str = "keep",
    description: str = "",
) -> Artifact:
    """Stages `fn` for the given argument shapes and serializes it with `jax.export`.

    Args:
      fn: a converted function, a plain user function (converted first), a `transpiler.jit`
        function, or a JAX transformation of one.
      *args_or_specs: arrays, Python numbers or `jax.ShapeDtypeStruct`s (pytrees of them):
        only their shapes and dtypes are used.
      platforms: where the artifact may run, e.g. `("cpu", "cuda")`; default: the platform of
        JAX's default device.
      prints: "keep" (default: a staged `print` makes export fail, since JAX cannot serialize
        host callbacks) or "drop" (the artifact does not print).
      checks: "keep" (default: a staged `assert`, a `raise` in a staged branch, or a run-time
        check Python makes too, such as an index of a list of traced length, makes export
        fail) or "drop": the artifact does not check them, so for inputs that would fail them it
        computes on instead of raising (a branch that raises gives zeros). Opt in knowingly.
      description: free text stored in the artifact's header.

    Returns:
      The `Artifact`: callable at once, `save(path)` writes it, `bytes(artifact)` is the file.

    Raises:
      ExportError: the staged program holds host callbacks that are kept (staged prints,
        asserts, raises or checks; the message names each with its line), or JAX cannot
        serialize it.
    """
    import jax

    from runtime import staging

    _check_choice("prints", prints)
    _check_choice("checks", checks)
    check_platforms(platforms)
    drop = {"print"} if prints == "drop" else set()
    if checks == "drop":
        drop.update(_CHECKS)
    from transpiler.graph import converted

    target = converted(fn)
    name = getattr(fn, "__name__", None) or type(fn).__name__

    def staged(*args, **kwargs):  # new each time: JAX's trace cache must not answer for it
        return target(*args, **kwargs)

    staged.__name__ = staged.__qualname__ = name
    specs = jax.tree_util.tree_map(_spec, args_or_specs)
    effects = staging.HostEffects(drop)
    try:
        with staging.filtering_host_effects(effects):
            exported = jax.export.export(jax.jit(staged), platforms=platforms)(*specs)
        payload = bytes(exported.serialize())
    except NotImplementedError as e:
        if "host_callback" not in str(e):
            raise
        raise ExportError(_callbacks_message(name, effects, staged, specs)) from None
    header = {
        "format": FORMAT_VERSION,
        "function": name,
        "description": description,
        "platforms": list(exported.platforms),
        "in_specs": [_aval_json(a) for a in exported.in_avals],
        "out_specs": [_aval_json(a) for a in exported.out_avals],
        "dropped": sorted(drop),
        "jax_version": jax.__version__,
    }
    return Artifact(exported, header, pack(header, payload))


def check_platforms(platforms: Sequence[str] | None) -> None:
    """Raises ValueError where `platforms` names one that is not in `PLATFORMS`."""
    unknown = [p for p in platforms or () if p not in PLATFORMS]
    if unknown:
        raise ValueError(
            f"platforms={tuple(platforms)!r}: {', '.join(map(repr, unknown))} is not one of "
            f"JAX's platforms ({', '.join(PLATFORMS)})"
        )


def _check_choice(option: str, value: str) -> None:
    if value not in ("keep", "drop"):
        raise ValueError(f'{option}={value!r}: expected "keep" or "drop"')


def _spec(value):
    import jax
    import numpy as np

    if isinstance(value, jax.ShapeDtypeStruct):
        return value
    if isinstance(value, bool | int | float | complex):
        return value  # jax.export gives Python numbers their weak type, as jax.jit does
    array = value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)
    return jax.ShapeDtypeStruct(array.shape, array.dtype)


def _aval_json(aval) -> dict:
    import numpy as np

    return {"shape": [_dimension(d) for d in aval.shape], "dtype": np.dtype(aval.dtype).name}


def _dimension(d) -> int | str:
    """A dimension for the header: its size, or the text of a symbolic one (`"n"`,
    `jax.export.symbolic_shape`), which has no size until the artifact is called."""
    try:
        return int(d)
    except Exception:  # noqa: BLE001 - JAX's InconclusiveDimensionOperation, not exported
        return str(d)


_WHAT = {
    "print": "a staged print",
    "assert": "a staged assert",
    "raise": "a raise in a branch of this staged if",
    "check": "a run-time check Python makes too (an index in range, a variable bound)",
}


def _callbacks_message(name: str, effects, staged, specs) -> str:
    kept = list(dict.fromkeys((kind, where) for kind, where, dropped in effects.met if not dropped))
    lines = [f"  {where or '(no line of yours)'}: {_WHAT[kind]}" for kind, where in kept]
    if not kept:  # a jax.debug.callback of the user's own, or of a library
        lines = [f"  {where}: a host callback" for where in _callback_lines(staged, specs)]
    message = (
        f"cannot export {name!r}: JAX cannot serialize host callbacks, and its staged program "
        "makes these:\n" + "\n".join(lines)
    )
    kinds = {kind for kind, _ in kept}
    if "print" in kinds:
        message += '\nPass prints="drop" to export it without its prints.'
    if kinds & set(_CHECKS):
        message += (
            '\nAsserts, raises and checks are part of what the program computes: checks="drop" '
            "exports it without them, and then inputs that would fail them give results "
            "instead of an error."
        )
    if not kept:
        message += "\nRemove the callbacks (jax.debug.print, jax.debug.callback) before export."
    return message


def _callback_lines(staged, specs) -> list[str]:
    import jax

    from transpiler import jaxprs

    closed = jax.jit(staged).trace(*specs).jaxpr
    found = [
        str(op.location) if op.location is not None else "(no line of yours)"
        for op in jaxprs.walk(closed.jaxpr)
        if op.eqn.effects and not jaxprs.nested(op.eqn)  # the callback, not what holds it
    ]
    return list(dict.fromkeys(found))


def pack(header: dict, payload: bytes) -> bytes:
    """The artifact's bytes: prefix, JSON header, payload."""
    header_bytes = json.dumps(header, sort_keys=True).encode("utf-8")
    digest = hashlib.sha256(header_bytes + payload).digest()
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes), len(payload), digest)
    return prefix + header_bytes + payload


def unpack(data: bytes, source: str = "the data") -> tuple[dict, bytes]:
    """(header, payload) of an artifact's bytes, checked.

    Raises:
      ArtifactError: `data` is not an artifact, is truncated or has extra bytes, does not match
        its SHA-256, or is in a format this version cannot read.
    """
    if not data:
        raise ArtifactError(f"{source} is empty: an artifact starts with {MAGIC!r}")
    if not data.startswith(MAGIC[: len(data)]):
        raise ArtifactError(
            f"{source} is not an astgraph artifact: it does not start with {MAGIC!r} "
            "(transpiler.export(...).save(path) writes them)"
        )
    if len(data) < _PREFIX.size:
        raise ArtifactError(
            f"{source} is truncated: it is {len(data)} bytes, shorter than the "
            f"{_PREFIX.size}-byte prefix every artifact starts with"
        )
    _, version, header_length, payload_length, digest = _PREFIX.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f"{source} is in artifact format {version}; this version of astgraph reads format "
            f"{FORMAT_VERSION}. Export the function again with this version."
        )
    expected = _PREFIX.size + header_length + payload_length
    if len(data) < expected:
        raise ArtifactError(
            f"{source} is truncated: its prefix announces {expected} bytes, it has {len(data)}"
        )
    if len(data) > expected:
        raise ArtifactError(
            f"{source} has {len(data) - expected} bytes after its end ({expected} bytes "
            "announced): it is damaged, or not one artifact"
        )
    body = data[_PREFIX.size :]
    if hashlib.sha256(body).digest() != digest:
        raise ArtifactError(
            f"{source} is damaged or was changed after export: its contents do not match the "
            "SHA-256 it was written with"
        )
    try:
        header = json.loads(body[:header_length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArtifactError(f"{source} has a malformed header: {e}") from None
    if not isinstance(header, dict):
        raise ArtifactError(
            f"{source} has a malformed header: a JSON {type(header).__name__}, not an object"
        )
    return header, body[header_length:]


def load(path_or_bytes: str | os.PathLike | bytes | bytearray) -> Artifact:
    """The function in an artifact written by `export`, ready to call.

    Needs neither the function's source nor this project's conversion: only JAX. The
    artifact's header is checked first (format, length, SHA-256), then its payload is read by
    `jax.export.deserialize`; nothing in it is run as Python code.

    Args:
      path_or_bytes: a file written by `Artifact.save`, or its bytes.

    Returns:
      The `Artifact`: call it on arrays of its `in_specs`.

    Raises:
      ArtifactError: the file is not an artifact, is truncated, damaged or changed, or holds a
        program this JAX cannot read.
      FileNotFoundError: there is no such file.
    """
    import jax

    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data, source = bytes(path_or_bytes), "the data"
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        source = os.fspath(path_or_bytes)
        if os.path.isdir(source):
            raise ArtifactError(f"{source} is a directory, not an artifact file")
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    else:
        raise TypeError(
            f"load() takes a path or bytes, not {type(path_or_bytes).__name__}: "
            "transpiler.load('f.bin')"
        )
    header, payload = unpack(data, source)
    try:
        exported = jax.export.deserialize(bytearray(payload))
    except Exception as e:  # noqa: BLE001 - any failure to read is the artifact's, named
        raise ArtifactError(
            f"{source} holds a program this JAX ({jax.__version__}) cannot read (exported with "
            f"JAX {header.get('jax_version', '?')}): {type(e).__name__}: {e}"
        ) from None
    return Artifact(exported, header, data)


class Artifact:
    """An exported function: callable, with its input and output specs.

    Attributes:
      exported: the `jax.export.Exported` inside.
      header: the artifact's header (function, description, platforms, specs, ...).
      in_specs: the positional arguments it takes, as a tuple of `jax.ShapeDtypeStruct` trees.
      out_specs: what it returns, as a tree of `jax.ShapeDtypeStruct`.
      platforms: where it can run (`("cpu",)`, `("cpu", "cuda")`).
      description: the text given to `export`.
    """

    def __init__(self, exported, header: dict, data: bytes):
        import jax

        self.exported = exported
        self.header = header
        self._data = data
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.in_avals]
        args, _ = jax.tree_util.tree_unflatten(exported.in_tree, specs)
        self.in_specs = args
        self.out_specs = jax.tree_util.tree_unflatten(
            exported.out_tree, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.out_avals]
        )
        self.platforms = tuple(exported.platforms)
        self.description = header.get("description", "")

    def __call__(self, *args, **kwargs):
        return self.exported.call(*args, **kwargs)

    def __bytes__(self) -> bytes:
        return self._data

    def __repr__(self) -> str:
        name = self.header.get("function", "?")
        return f"<astgraph artifact {name}: {len(self._data)} bytes, {', '.join(self.platforms)}>"

    def save(self, path: str | os.PathLike) -> None:
        """Writes the artifact to `path`."""
        with open(path, "wb") as f:
            f.write(self._data)
