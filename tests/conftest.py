"""Shared test settings: small shapes, CPU, deterministic."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
