"""Sample programs written as plain Python, converted by `python -m transpiler demo`."""
