"""Levenshtein edit distance between two integer token arrays, padded, of traced true lengths.

`edit_distance` fills the dynamic-programming table `d` (an array, updated with `.at[]`) in
nested `for i in range(1, len_a + 1):` / `for j in range(1, len_b + 1):` loops. The lengths are
arguments, traced under `jit`, so both loops become `lax.while_loop`s over a counter (the inner
one inside the outer one); the `0 if a[i - 1] == b[j - 1] else 1` a select. `edit_distance_rows`
keeps one row as a Python list built by `append` in an inner loop over the padded width, inside
the staged outer loop. The inner loop reads the row at `j - 1`, in range in every iteration, but
its first item is the outer loop's index `i` (an int as Python has it, weakly typed) and the
items appended are int32 arrays: one array of the row's items would read `row[0]` as an int32,
not as `i`, so the inner loop runs unrolled over the padded width (see docs/semantics.md on
loops over ranges). `edit_distances` batches pairs of sequences
with `jax.vmap`, which batches the loops: each pair runs its own trip counts.
"""

import jax
import jax.numpy as jnp

import transpiler
from samples.common import agree, run


def edit_distance(a, b, len_a, len_b):
    """The edit distance between `a[:len_a]` and `b[:len_b]` (insert, delete, substitute: 1)."""
    d = jnp.zeros((a.shape[0] + 1, b.shape[0] + 1), dtype=jnp.int32)
    for i in range(len_a + 1):
        d = d.at[i, 0].set(i)
    for j in range(len_b + 1):
        d = d.at[0, j].set(j)
    for i in range(1, len_a + 1):
        for j in range(1, len_b + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d = d.at[i, j].set(min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + cost))
    return d[len_a, len_b]


def edit_distance_rows(a, b, len_a, len_b):
    """The same distance, keeping only the previous row of the table."""
    prev = jnp.arange(b.shape[0] + 1)
    for i in range(1, len_a + 1):
        row = [i]
        for j in range(1, b.shape[0] + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost))
        prev = jnp.array(row)
    return prev[len_b]


def edit_distances(a, b, len_a, len_b):
    """The edit distance of each pair of rows of `a` and `b`."""
    return jax.vmap(edit_distance)(a, b, len_a, len_b)


def pad(tokens, width):
    """`tokens` as an int32 array of `width` items, zeros after them, and their count."""
    tokens = list(tokens)
    return jnp.array(tokens + [0] * (width - len(tokens)), dtype=jnp.int32), len(tokens)


WORDS = [("kitten", "sitting"), ("flaw", "lawn"), ("gumbo", "gambol"), ("", "abc")]


def encode(word, width=8):
    return pad([ord(c) - ord("a") + 1 for c in word], width)


def main():
    (a, len_a), (b, len_b) = encode("kitten"), encode("sitting")
    print("edit distance of 'kitten' and 'sitting' (padded to 8 tokens):")
    distance, _ = run(edit_distance, a, b, len_a, len_b)
    print(f"  {int(distance)}")
    print("keeping one row, as a Python list:")
    distance, _ = run(edit_distance_rows, a, b, len_a, len_b)
    print(f"  {int(distance)}")

    pairs = [(encode(x), encode(y)) for x, y in WORDS]
    a = jnp.stack([x for (x, _), _ in pairs])
    b = jnp.stack([y for _, (y, _) in pairs])
    len_a = jnp.array([n for (_, n), _ in pairs])
    len_b = jnp.array([n for _, (_, n) in pairs])
    batched = transpiler.jit(edit_distances)(a, b, len_a, len_b)
    eager = [int(edit_distance(a[k], b[k], len_a[k], len_b[k])) for k in range(len(pairs))]
    print(f"batched with jax.vmap over {len(WORDS)} pairs (eager: one pair at a time):")
    for (x, y), d, e in zip(WORDS, batched.tolist(), eager):
        print(f"  {x!r:>9} -> {y!r:<9} {d}  (eager {e})")
    agree(jnp.array(eager), batched)


if __name__ == "__main__":
    main()
