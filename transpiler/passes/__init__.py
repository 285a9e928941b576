"""One AST pass per file; `transpiler.pipeline` runs them in order."""
