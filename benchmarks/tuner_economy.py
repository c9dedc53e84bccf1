"""Sampler economy: how many trials each search strategy needs to come within 3% of the best.

Two modes:

    python3 benchmarks/tuner_economy.py --measure [--kernel K ...] [--table FILE]      # GPU
    python3 benchmarks/tuner_economy.py [--table FILE] [--seeds 20] [--samplers ...]   # CPU

``--measure`` times an enumerable subspace of each family exhaustively on the GPU at hand
(``SUBSPACES``: a few knobs, the rest at the workload's default; every config the space
runs as itself and its constraints admit) for 2-3 workloads per family (``WORKLOADS``),
each config verified and timed in the tuner's worker process as a trial is, the next ones
compiled ahead meanwhile (``tuner.precompile``). The table (workload, config -> median us,
or the failure) is written after every config: a killed run goes on where it stopped.

The replay (no GPU) runs each sampler against a table as the study runs it: the default
first (every sampler), then the sampler's asks over the subspace's knobs, each draw made
canonical; a config outside the table (refused by the constraints) and one already measured
cost nothing, every other costs one trial. ``transfer`` is the campaign's start: TPE after
the default and the exhaustive best of the two nearest other workloads of the family in
the table (as tuned neighbours' winners are enqueued). For each sampler, family and seed:
the trials until the best measured is within 3% of the table's best (capped at the table's
size). Reported per sampler and family: median and worst over seeds and workloads, and how
often the cap was hit. GP is replayed only when named (``--samplers gp``): each of its asks
fits a Gaussian process (about 0.15 s on a CPU core), and where it keeps proposing configs
already measured a run takes 20 asks per config before it counts as missed (110 s for one
seed of mhc's 37 configs).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root for tuner / kernel_templates
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "economy"
WITHIN = 0.03
"""A search has reached the best once its best measured time is within this fraction of it."""

SUBSPACES: dict[str, tuple[str, ...]] = {
    "moe_routing": ("BLOCK_T", "FUSED", "MAX_PROGRAMS", "num_warps"),
    "mhc": ("GLUON", "BLOCK_T", "SPLIT_K", "num_warps", "num_stages"),
    "nvfp4_attention": ("GLUON", "BLOCK_N", "NUM_SPLITS", "num_warps", "BLOCK_H"),
    "sparse_mqa": ("NUM_SPLITS", "TOPK_SPLITS", "num_warps"),
    "engram": ("ROWS", "GRID_SM_FRAC", "num_warps"),
}
"""The knobs each family's exhaustive subspace varies (the others stay at the workload's default).
On sm_90 the ``WORKLOADS`` below admit (per workload): moe_routing 248 / 304 / 333 configs,
mhc 51 / 40 / 37, nvfp4_attention 42 / 42 / 57, sparse_mqa 192 / 112 / 112, engram 151 / 180 / 151."""

WORKLOADS: dict[str, tuple[dict[str, Any], ...]] = {
    "moe_routing": ({"tokens": 256, "profile": "dsv3"}, {"tokens": 1024, "profile": "dsv3"},
                    {"tokens": 4096, "profile": "dsv41-flash"}),
    "mhc": ({"op": "seam", "tokens": 64, "dim": 5120}, {"op": "seam", "tokens": 1024, "dim": 5120},
            {"op": "seam", "tokens": 4096, "dim": 5120}),
    "nvfp4_attention": ({"batch": 16, "context": 32768, "heads": 16, "kv_dtype": "nvfp4", "mode": "dense", "page": 64},
                        {"batch": 16, "context": 131072, "heads": 16, "kv_dtype": "nvfp4", "mode": "dense", "page": 64},
                        {"batch": 64, "context": 32768, "heads": 64, "kv_dtype": "nvfp4", "mode": "dense", "page": 64}),
    "sparse_mqa": ({"batch": 1, "context": 131072, "next_n": 1, "profile": "dsv32"},
                   {"batch": 32, "context": 131072, "next_n": 1, "profile": "dsv32"},
                   {"batch": 32, "context": 524288, "next_n": 1, "profile": "dsv32"}),
    "engram": ({"tokens": 256, "placement": "hbm", "table_rows": 8388608},
               {"tokens": 4096, "placement": "hbm", "table_rows": 8388608},
               {"tokens": 256, "placement": "host", "table_rows": 8388608}),
}
"""The workloads ``--measure`` tables, per family (neighbours of one another: the transfer start needs them)."""

SAMPLERS = ("random", "tpe", "gp", "cmaes", "transfer")
DEFAULT_SAMPLERS = ("random", "tpe", "transfer")
"""Replayed without ``--samplers``: all but GP (slow, see above) and CMA-ES (random on categorical knobs)."""


# -- the subspace ---------------------------------------------------------------------------
def subspace(kernel: Any, workload: Any, target: Any, knobs: tuple[str, ...]) -> tuple[dict[str, Any], list[dict]]:
    """(base, configs): the workload's default as the base, and every distinct config of the
    knobs' product over it that the space runs as itself and admits, the default first."""
    from tuner.spec import config_key

    base = kernel.default_config(workload, target)
    out: dict[str, dict[str, Any]] = {}
    if kernel.admits(base, workload, target):
        out[config_key(base)] = base
    for combo in itertools.product(*(kernel.space[n].values() for n in knobs)):
        cfg = kernel.canonical(dict(base, **dict(zip(knobs, combo))), workload, target)
        if config_key(cfg) not in out and kernel.admits(cfg, workload, target):
            out[config_key(cfg)] = cfg
    return base, list(out.values())


# -- replay ---------------------------------------------------------------------------------
def _sampler(name: str, seed: int):
    import optuna

    if name in ("tpe", "transfer"):
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(f"unknown sampler {name!r}")


def available(name: str) -> bool:
    """The sampler's package is installed (GP: scipy; CMA-ES: cmaes)."""
    import importlib.util

    need = {"gp": "scipy", "cmaes": "cmaes"}.get(name)
    return need is None or importlib.util.find_spec(need) is not None


def _knob_values(table: dict[str, Any]) -> dict[str, list[Any]]:
    """Each varied knob's values, in the space's order (what the sampler chooses among)."""
    vals: dict[str, list[Any]] = {}
    for n in table["knobs"]:
        seen: list[Any] = []
        for r in table["results"]:
            if r["config"][n] not in seen:
                seen.append(r["config"][n])
        order = table.get("values", {}).get(n)
        vals[n] = [v for v in order if v in seen] if order else seen
    return vals


def neighbours_best(tables: list[dict[str, Any]], table: dict[str, Any], limit: int = 2) -> list[dict[str, Any]]:
    """The exhaustive best configs of the ``limit`` nearest other workloads of the family in
    ``tables`` (log2 distance over the numeric axes, the same categorical axes first)."""
    from tuner.spec import log2_distance

    wd = table["workload"]
    num = [a for a, v in wd.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    others = []
    for t in tables:
        if t is table or t["kernel"] != table["kernel"]:
            continue
        ok = [r for r in t["results"] if r.get("median_us") is not None]
        if not ok:
            continue
        same = all(str(t["workload"].get(a)) == str(v) for a, v in wd.items() if a not in num)
        others.append((not same, log2_distance(t["workload"], wd, num), min(ok, key=lambda r: r["median_us"])["config"]))
    return [c for *_, c in sorted(others, key=lambda x: (x[0], x[1]))[:limit]]


def replay(table: dict[str, Any], sampler: str, seed: int, start: list[dict[str, Any]] = ()) -> int | None:
    """Trials ``sampler`` (seeded) needs on ``table`` until its best is within ``WITHIN`` of the
    table's best; None when it is not reached within as many trials as the table has configs.
    ``start``: configs enqueued after the default (``transfer``), each as this workload's space
    runs it (its varied knobs over the table's base, made canonical), as the study carries a
    neighbour's winner into its space; one still outside the table is skipped as the study skips
    a winner its space would not run."""
    import optuna

    from tuner.spec import config_key

    times = {config_key(r["config"]): r.get("median_us") for r in table["results"]}
    ok = [t for t in times.values() if t is not None]
    target = min(ok) * (1 + WITHIN)
    knobs = _knob_values(table)
    base = table["base"]
    cap = len(times)
    study = optuna.create_study(direction="minimize", sampler=_sampler(sampler, seed))
    for cfg in [table["default"], *(canonical(table, dict(base, **{n: c[n] for n in knobs if n in c})) for c in start)]:
        if config_key(cfg) in times:
            study.enqueue_trial({n: cfg[n] for n in knobs})
    measured: set[str] = set()
    best = math.inf
    asks = 0
    while len(measured) < cap and asks < 20 * cap:
        asks += 1
        trial = study.ask()
        draw = dict(base, **{n: trial.suggest_categorical(n, v) for n, v in knobs.items()})
        ck = config_key(canonical(table, draw))
        if ck not in times:  # refused by the space or its constraints: pruned, free
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        t = times[ck]
        if ck in measured:  # known: told again, free
            study.tell(trial, t) if t is not None else study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        measured.add(ck)
        if t is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, t)
            best = min(best, t)
        if best <= target:
            return len(measured)
    return None


_CANONICAL: dict[str, Any] = {}


def canonical(table: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as the family's space runs it on the table's workload and GPU (a table of a
    family this checkout lacks, e.g. a synthetic one, is taken as it is)."""
    from tuner import registry
    from tuner.runtime.target import Target
    from tuner.spec import workload_from_dict

    k = registry.kernels().get(table["kernel"])
    if k is None or not set(config) <= set(k.space):
        return config
    key = json.dumps([table["kernel"], table["workload"], table.get("target")], sort_keys=True)
    if key not in _CANONICAL:
        _CANONICAL[key] = (workload_from_dict(k.spec.workload, table["workload"]),
                           Target.named(table["target"]) if table.get("target") else Target.of())
    wl, tgt = _CANONICAL[key]
    return k.canonical(config, wl, tgt)


def economy(tables: list[dict[str, Any]], samplers: list[str], seeds: int) -> dict[str, Any]:
    """Replay every sampler ``seeds`` times on every table: per sampler and family, the trials
    to within ``WITHIN`` of the best (median, worst) and the runs that never got there."""
    out: dict[str, Any] = {"within": WITHIN, "seeds": seeds, "tables": len(tables), "rows": []}
    families = sorted({t["kernel"] for t in tables})
    for name in samplers:
        for fam in families:
            got: list[int | None] = []
            t0 = time.perf_counter()
            for table in (t for t in tables if t["kernel"] == fam):
                start = neighbours_best(tables, table) if name == "transfer" else []
                got += [replay(table, name, seed, start) for seed in range(seeds)]
            reached = [g for g in got if g is not None]
            sizes = [len(t["results"]) for t in tables if t["kernel"] == fam]
            med = statistics.median(g if g is not None else math.inf for g in got) if got else math.inf
            out["rows"].append({
                "sampler": name, "family": fam, "runs": len(got), "configs": sizes,
                "median": None if med == math.inf else med,  # None: more than half never got there
                "worst": max(reached) if reached and len(reached) == len(got) else None,
                "missed": len(got) - len(reached), "seconds": round(time.perf_counter() - t0, 2)})
    return out


def render(result: dict[str, Any]) -> list[str]:
    """The replay as a text table: one row per sampler and family."""
    lines = [f"trials to within {100 * result['within']:.0f}% of the exhaustive best "
             f"({result['seeds']} seeds per workload; median / worst; missed: never within the table's size)",
             f"{'sampler':9} {'family':16} {'configs':>14} {'median':>7} {'worst':>6} {'missed':>7}"]
    for r in result["rows"]:
        med = f">{max(r['configs'])}" if r["median"] is None else f"{r['median']:g}"
        worst = f">{max(r['configs'])}" if r["worst"] is None else str(r["worst"])
        lines.append(f"{r['sampler']:9} {r['family']:16} {'/'.join(map(str, r['configs'])):>14} {med:>7} "
                     f"{worst:>6} {r['missed']:>4}/{r['runs']}")
    return lines


# -- measure (GPU) --------------------------------------------------------------------------
def measure(kernels: list[str], table_path: Path, ahead: int) -> None:
    """Exhaustive tables of ``WORKLOADS`` on this GPU into ``table_path`` (resumed where it stopped)."""
    from tuner import registry
    from tuner.device import git_commit
    from tuner.precompile import Precompiler, default_processes
    from tuner.runtime.env import gpu_identity
    from tuner.runtime.target import Target
    from tuner.spec import config_key, input_seed, workload_from_dict, workload_key
    from tuner.timing import gpu_available
    from tuner.worker import Worker

    if not gpu_available():
        sys.exit("--measure needs a GPU (the replay runs anywhere)")
    target = Target.of()
    doc = json.loads(table_path.read_text()) if table_path.is_file() else {}
    doc.update(gpu=gpu_identity()["gpu"], target=target.name, commit=git_commit(),
               command=" ".join(["python3", "benchmarks/tuner_economy.py", *sys.argv[1:]]))
    tables = index_tables(doc.get("tables", []))
    cache = str(table_path.with_suffix(".triton-cache"))
    with Worker(timeout_s=120.0, cache_dir=cache) as worker:
        for name in kernels:
            k = registry.get(name)
            with Precompiler(name, target, processes=ahead or default_processes(), cache_dir=cache) as pool:
                for wd in WORKLOADS[name]:
                    wl = workload_from_dict(k.spec.workload, wd)
                    base, configs = subspace(k, wl, target, SUBSPACES[name])
                    t = tables.setdefault((name, workload_key(wl)), {
                        "kernel": name, "workload": wd, "target": target.name, "knobs": list(SUBSPACES[name]),
                        "values": {n: list(k.space[n].values()) for n in SUBSPACES[name]},
                        "base": base, "default": k.default_config(wl, target), "results": []})
                    t["configs"] = len(configs)
                    done = {config_key(r["config"]) for r in t["results"]}
                    todo = [c for c in configs if config_key(c) not in done]
                    print(f"{name} {workload_key(wl)}: {len(configs)} configs, {len(todo)} to measure", flush=True)
                    for c in todo:
                        pool.submit(wd, c)
                    for i, c in enumerate(todo):
                        pool.wait(wd, c, 300.0)
                        r = worker.evaluate(name, wd, c, input_seed(workload_key(wl)))
                        t["results"].append({"config": c, "status": r.status, "median_us": r.median_us,
                                             "p20_us": r.p20_us, "p80_us": r.p80_us})
                        doc["tables"] = list(tables.values())
                        table_path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
                        if (i + 1) % 10 == 0 or i + 1 == len(todo):
                            print(f"  {i + 1}/{len(todo)}", flush=True)


def index_tables(tables: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The stored tables by (kernel, workload key), the key the tuner writes whatever order the JSON keeps
    the workload's axes in; two tables of one workload are merged (a config's first result kept)."""
    from tuner import registry
    from tuner.spec import config_key, workload_from_dict, workload_key

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for t in tables:
        key = (t["kernel"], workload_key(workload_from_dict(registry.get(t["kernel"]).spec.workload, t["workload"])))
        if key not in out:
            out[key] = t
            continue
        seen = {config_key(r["config"]) for r in out[key]["results"]}
        out[key]["results"] += [r for r in t["results"] if config_key(r["config"]) not in seen]
    return out


def complete(table: dict[str, Any]) -> bool:
    """Every config of the table's subspace is measured (a table without ``configs``, e.g. a
    synthetic one, is taken as complete): the exhaustive best of a partial table is not the best."""
    return len(table["results"]) >= table.get("configs", 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measure", action="store_true", help="build the exhaustive tables on this GPU")
    ap.add_argument("--kernel", action="append", choices=sorted(SUBSPACES), help="families (default: all)")
    ap.add_argument("--table", type=Path, help="the tables' file (default: benchmarks/results/economy/<gpu>.json "
                    "with --measure; to replay, required)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds per sampler and workload (default 20)")
    ap.add_argument("--samplers", default=",".join(DEFAULT_SAMPLERS),
                    help=f"comma-separated, of {', '.join(SAMPLERS)} (default {','.join(DEFAULT_SAMPLERS)}: GP is slow)")
    ap.add_argument("--ahead", type=int, default=0, help="--measure: compile-ahead processes (default: half the cores)")
    ap.add_argument("--out", type=Path, help="replay: write the result JSON here (default: beside the table)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if not samplers or set(samplers) - set(SAMPLERS):
        ap.error(f"--samplers: choose from {', '.join(SAMPLERS)}")
    kernels = args.kernel or sorted(SUBSPACES)
    if args.measure:
        from tuner.runtime.env import gpu_identity

        slug = gpu_identity()["gpu"].lower().replace(" ", "-")
        path = args.table or OUT / f"{slug}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        measure(kernels, path, args.ahead)
        print(f"tables: {path}")
        return 0
    if args.table is None or not args.table.is_file():
        ap.error("give --table FILE: a table made by --measure (or a synthetic one)")
    doc = json.loads(args.table.read_text())
    tables = [t for t in doc["tables"] if not args.kernel or t["kernel"] in kernels]
    for t in tables:
        if not complete(t):
            wl = ",".join(f"{a}={v}" for a, v in t["workload"].items())
            print(f"leaving out {t['kernel']} {wl}: {len(t['results'])} of {t['configs']} configs measured")
    tables = [t for t in tables if complete(t) and any(r.get("median_us") for r in t["results"])]
    skipped = [s for s in samplers if not available(s)]
    for s in skipped:
        print(f"skipping {s}: its package is not installed (pip install 'tuner[{s}]')")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    result = economy(tables, [s for s in samplers if s not in skipped], args.seeds)
    result.update(source=str(args.table), gpu=doc.get("gpu"), commit=doc.get("commit"))
    print("\n".join(render(result)))
    out = args.out or args.table.with_name(args.table.stem + "-replay.json")
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"replay: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
