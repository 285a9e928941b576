"""Command line for the differential fuzzer.

    python -m tests.fuzz.run --seeds N [--start S] [--generator NAME] [--jobs J]
                             [--show K] [--minimise-budget SECONDS]
                             [--modes python,jit,vmap,grad,hessian]

Generators: `programs`, `model` (Python ints; modes python, jit, vmap) and `numeric` (floats
and mixed dtypes against eager JAX; modes python, jit, vmap, grad, hessian). A mode a generator's spec
does not have is left out for it.

Prints, per generator, a table of outcomes per mode (pass / refusal / failure), the failure
kinds and refusal kinds with counts and example seeds, the construct classes of the programs
that failed, the PEP 765 check, and then the first failing program of each failure kind,
minimised (greedy AST reduction that keeps the same mode and kind of failure).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import sys
import time


def _init_worker():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _check(job):
    generator, seed, modes = job
    from tests.fuzz import harness, model_programs

    source, checked = harness.check_seed(generator, seed, modes)
    return generator, seed, source, model_programs.classes_of(source), checked


def _minimise(job):
    generator, source, target, budget = job
    from tests.fuzz import harness

    return harness.minimise(source, target, budget, spec=harness.SPECS[generator])


def _pool(jobs):
    if jobs <= 1:
        return None
    return concurrent.futures.ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker
    )


def _map(pool, fn, items):
    if pool is None:
        return map(fn, items)
    return pool.map(fn, items)


def main(argv=None) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from tests.fuzz import harness
    from tests.fuzz.model_programs import CLASS_NAMES

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--start", type=int, default=0)
    p.add_argument(
        "--generator", default="all", help=f"one of {sorted(harness.GENERATORS)} or 'all'"
    )
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--show", type=int, default=40, help="most failing programs to print")
    p.add_argument("--per-kind", type=int, default=3, help="programs (sites) per failure kind")
    p.add_argument("--sites", type=int, default=4, help="sites listed per kind")
    p.add_argument("--minimise-budget", type=float, default=60.0, help="seconds per kind; 0: off")
    p.add_argument("--modes", default=",".join(harness.MODES))
    args = p.parse_args(argv)

    generators = sorted(harness.GENERATORS) if args.generator == "all" else [args.generator]
    modes = tuple(m for m in args.modes.split(",") if m)
    jobs = [(g, s, modes) for g in generators for s in range(args.start, args.start + args.seeds)]
    started = time.monotonic()
    pool = _pool(args.jobs)
    results = []
    for done, r in enumerate(_map(pool, _check, jobs), 1):
        results.append(r)
        if done % 50 == 0:
            print(
                f"  ... {done}/{len(jobs)} programs, {time.monotonic() - started:.0f}s",
                file=sys.stderr,
                flush=True,
            )

    # -- outcome table
    import transpiler

    print(
        f"\n== {len(results)} programs, {time.monotonic() - started:.0f}s "
        f"(transpiler from {os.path.dirname(transpiler.__file__)}) ==\n"
    )
    print(f"{'generator':<10} {'mode':<7} {'pass':>6} {'refusal':>8} {'failure':>8} {'skip':>6}")
    for g in generators:
        for m in modes:
            c = collections.Counter(
                o.status
                for gg, _, _, _, ch in results
                if gg == g
                for o in ch.outcomes
                if o.mode == m
            )
            print(
                f"{g:<10} {m:<7} {c['pass']:>6} {c['refusal']:>8} {c['failure']:>8} {c['skip']:>6}"
            )
    gen_errors = [
        (g, s, o)
        for g, s, _, _, ch in results
        for o in ch.outcomes
        if o.kind.startswith("generator")
    ]
    for g, s, o in gen_errors[:5]:
        print(f"GENERATOR PROBLEM {g} seed {s}: {o.kind}")

    # -- failure and refusal kinds, grouped across modes (a conversion error shows in all three)
    kinds = collections.defaultdict(list)  # (status, kind) -> [(generator, seed, src, cls, o)]
    for g, s, src, cls, ch in results:
        for o in ch.outcomes:
            if o.status in ("failure", "refusal"):
                kinds[(o.status, o.kind)].append((g, s, src, cls, o))
    for status in ("failure", "refusal"):
        rows = sorted(
            ((k, v) for k, v in kinds.items() if k[0] == status),
            key=lambda kv: -len({(r[0], r[1]) for r in kv[1]}),
        )
        mode_names = "/".join(harness.MODES)
        print(f"\n{status.upper()} KINDS ({len(rows)}): programs, per mode ({mode_names})")
        for (_, kind), v in rows:
            programs = sorted({(g, s) for g, s, *_ in v})
            per_mode = collections.Counter(r[4].mode for r in v)
            modes_text = "/".join(str(per_mode[m]) for m in harness.MODES)
            ex = ", ".join(f"{g[0]}{s}" for g, s in programs[:3])
            print(f"  {len(programs):>4} {modes_text:>11}  {kind}   [e.g. {ex}]")
            sites = collections.Counter(r[4].site for r in v if r[4].site)
            for site, n in sites.most_common(args.sites):
                print(f"{'':>18}at {site}: {n}")
            if len(sites) > args.sites:
                print(f"{'':>18}... {len(sites) - args.sites} more sites")

    # -- classes
    if any(cls for *_, cls, _ in results):
        print("\nCLASSES (model generator): programs containing / with a failure / refused")
        for c, name in CLASS_NAMES.items():
            having = [ch for *_, cls, ch in results if c in cls]
            failed = sum(any(o.status == "failure" for o in ch.outcomes) for ch in having)
            refused = sum(any(o.status == "refusal" for o in ch.outcomes) for ch in having)
            print(f"  {c:>2} {name:<52} {len(having):>5} {failed:>5} {refused:>5}")

    problems = harness.check_pep765()
    print(
        "\nPEP 765 (return/break/continue leaving finally -> ConversionError):",
        "ok" if not problems else problems,
    )

    # -- first failing program of each kind, minimised
    todo = []
    failures = sorted(
        ((k, v) for k, v in kinds.items() if k[0] == "failure"), key=lambda kv: -len(kv[1])
    )
    for _, v in failures:
        # per kind, one program per site (the most common sites first), from the first mode
        # that shows it (python before jit before vmap), the shortest program
        by_site = collections.defaultdict(list)
        for r in v:
            by_site[r[4].site].append(r)
        for site in sorted(by_site, key=lambda k: -len(by_site[k]))[: args.per_kind]:
            rows = by_site[site]
            first = min(harness.MODES.index(r[4].mode) for r in rows)
            rows = sorted(
                (r for r in rows if harness.MODES.index(r[4].mode) == first),
                key=lambda r: len(r[2]),
            )
            # no site (a wrong result): programs with different construct classes
            picked, classes = [], set()
            for r in rows:
                if r[3] not in classes:
                    picked.append(r)
                    classes.add(r[3])
            for g, s, src, _cls, o in picked[: 1 if site else args.per_kind]:
                todo.append((g, s, src, o))
    todo = todo[: args.show]
    if todo:
        print(f"\nFAILING PROGRAMS, ONE PER KIND AND SITE ({len(todo)})")
        if args.minimise_budget > 0:
            minimised = list(
                _map(
                    pool,
                    _minimise,
                    [(g, src, o, args.minimise_budget) for g, _, src, o in todo],
                )
            )
        else:
            minimised = [(src, o) for _, _, src, o in todo]
        shown = set()
        for (g, s, _, o), (msrc, mo) in zip(todo, minimised):
            if (o.kind, msrc) in shown:
                continue
            shown.add((o.kind, msrc))
            n = len({(r[0], r[1]) for r in kinds[("failure", o.kind)] if r[4].site == o.site})
            site = f" at {o.site}" if o.site else ""
            print(f"\n--- [{o.mode}] {o.kind}{site}   ({g} seed {s}; {n} programs)")
            print(f"    {mo.detail}")
            print(msrc.rstrip())
    if pool is not None:
        pool.shutdown()
    return 1 if any(k[0] == "failure" for k in kinds) else 0


if __name__ == "__main__":
    sys.exit(main())
