"""Tests with the libraries models are written with: Equinox, Flax NNX, optax, diffrax."""
