"""The `tune` command line end to end on a temporary database (interpreter on the CPU)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.cli.main import main
from tuner.runtime.target import INTERPRETER, Target


class _Moe:
    """The moe_routing Kernel, looked up when first used (the registry imports every family)."""

    def __getattr__(self, name):
        from tuner import registry

        return getattr(registry.get("moe_routing"), name)


MOE = _Moe()

ROOT = Path(__file__).resolve().parents[1]


def tune(*args: str) -> int:
    return main(list(args))


def test_help_and_list(capsys):
    assert tune("--help") == 0
    assert tune("list") == 0
    out = capsys.readouterr().out
    assert "moe-routing" in out and "profile" in out
    assert tune("moe-routing", "--help") == 0
    assert "--tokens" in capsys.readouterr().out


@pytest.mark.parametrize("args, needle", [
    (["nope"], "No such command"),
    (["show", "nope"], "unknown kernel"),
    (["moe-routing", "--tokens", "5..1"], "empty range"),
    (["moe-routing", "--tokens", "abc"], "not a valid int"),
    (["moe-routing", "--tokens", "0"], "must be positive"),
    (["moe-routing", "--tokens", "100000"], "outside 1..8192"),
    (["moe-routing", "--profile", "gpt5"], "unknown value"),
    (["moe-routing", "--sampler", "annealing"], "unknown sampler 'annealing'"),
    (["moe-routing", "--budget", "soon"], "bad duration"),
    (["moe-routing", "--trials", "0"], "at least 1"),
    (["moe-routing", "--try", "{num_warps: 8}"], "--try: not JSON"),
    (["moe-routing", "--try", "[1, 2]"], "want a JSON object"),
    (["moe-routing", "--try", '{"WARPS": 8}'], "WARPS not in moe_routing's search space"),
    (["moe-routing", "--try", '{"num_warps": 3}'], "num_warps=3 not a value of moe_routing's search space"),
    (["lower", "moe-routing", "--target", "sm_42"], "unknown 'sm_42'"),
    (["moe-routing", "--preflight", "sm_42"], "--preflight: unknown target 'sm_42'"),
    (["moe-routing", "--pack", "packs/nvidia-h200"], "--pack applies to --preflight only"),
    (["moe-routing", "--preflight", "sm_90", "--pack", "/nonexistent/pack"], "--pack: /nonexistent/pack: no manifest"),
    (["verify-pack", "/nonexistent/pack"], "no manifest.json"),
    (["moe-routing", "--try", '{"num_stages": 2.0}'], "num_stages=2.0 not a value (of another type)"),  # 2.0 == 2
    (["moe-routing", "--try", '{"FUSED": 0}'], "FUSED=0 not a value (of another type)"),
    (["moe-routing", "--preflight", ""], "--preflight: unknown target ''"),
    (["moe-routing", "--seed", "-1"], "--seed: -1 is not in"),
    (["moe-routing", "--timeout", "10000h"], "at most 480h"),
    (["moe-routing", "--budget", "1h30"], "give each part its unit"),
    (["moe-routing", "--budget", ""], "bad duration"),
    (["regressions", "--kernel", "nosuch"], "unknown kernel 'nosuch'"),
    (["regressions", "--since", "800000d"], "--since: bad date"),
    (["regressions", "--since", ""], "--since: bad date"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, tmp_path):
    assert tune(*args, *(["--db", str(tmp_path / "r.db")] if args[0] == "moe-routing" else [])) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "Traceback" not in err
    assert len(err.splitlines()) == 1, err


def test_a_try_takes_an_int_for_a_float_parameter_as_that_float():
    """``{"GRID_SM_FRAC": 2}`` is engram's 2.0 (one config, one key), not a new config."""
    from tuner import registry
    from tuner.cli.tune import _tries

    ((item,),) = _tries(['{"GRID_SM_FRAC": 2}'], registry.get("engram"))
    assert item == ("GRID_SM_FRAC", 2.0) and isinstance(item[1], float)


def test_database_urls_that_would_lose_or_leak_are_one_line(tmp_path, capsys):
    """An in-memory database would drop every measurement with the process; an empty --db is
    not the default; a URL's password is never printed; an empty file stays empty when read."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for args, needle in ((["moe-routing", "--db", "sqlite://"], "in-memory"),
                         (["moe-routing", "--db", "sqlite:///:memory:"], "in-memory"),
                         (["moe-routing", "--db", ""], "--db: empty"),
                         (["show", "moe-routing", "--db", "postgresql://u:secret@127.0.0.1:1/db"], "u:***@"),
                         (["show", "moe-routing", "--db", str(empty)], "is empty")):
        assert tune(*args) == 2, args
        err = capsys.readouterr().err.strip()
        assert needle in err and "secret" not in err and len(err.splitlines()) == 1, err
    assert empty.stat().st_size == 0


def test_int_axes_take_binary_suffixes():
    """`--table-rows 8M` / `--context 128K` as the benchmarks take them (binary: 8M = 8 << 20)."""
    from kernel_templates.engram import Workload
    from tuner.cli.common import CliError, expand_grid

    base = [Workload(256, "host", 1 << 20)]
    got = expand_grid(Workload, base, {"table_rows": "8M,32m", "tokens": "1K"})
    assert [(w.tokens, w.table_rows) for w in got] == [(1024, 8 << 20), (1024, 32 << 20)]
    assert [w.table_rows for w in expand_grid(Workload, got, {"table_rows": "16M..64M"})] == [32 << 20]
    with pytest.raises(CliError, match="suffixes allowed"):
        expand_grid(Workload, base, {"table_rows": "8X"})


def test_unreadable_database_exits_2(tmp_path, capsys):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 64)
    for args in (["moe-routing", "--quick", "--db", str(junk)], ["show", "moe-routing", "--db", str(junk)],
                 ["export", "--out", str(tmp_path / "p"), "--db", str(junk)]):
        assert tune(*args) == 2
        err = capsys.readouterr().err.strip()
        assert "cannot use database" in err and len(err.splitlines()) == 1


def test_quick_tune_export_load_select_round_trip(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--db", db) == 0
    assert tune("show", "moe-routing", "--db", db) == 0
    out = capsys.readouterr().out
    assert "tokens profile" in out and "3 dsv3" in out and "older" not in out, out
    pack_dir = tmp_path / "pack"
    assert tune("export", "--out", str(pack_dir), "--db", db) == 0
    assert tune("verify-pack", str(pack_dir)) == 0
    # a pack folder that cannot be made (under a plain file): one line, exit 2, no traceback
    (tmp_path / "plain").write_text("x")
    capsys.readouterr()
    assert tune("export", "--out", str(tmp_path / "plain" / "pack"), "--db", db) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: cannot write the pack to {tmp_path / 'plain' / 'pack'}: Not a directory", err
    # the same for the dashboard's report file, and a path with rich markup in it prints as given
    odd = tmp_path / "plain" / "[red]x" / "r.html"
    assert tune("dashboard", "--out", str(odd), "--db", db) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --out: no folder {odd.parent} for the report (create it, or give another path)", err
    from tuner import runtime
    from tuner.store import Winner, open_store
    from sqlalchemy import select

    with open_store(db).session() as s:
        winner = s.scalars(select(Winner)).one()
    pack = runtime.load_pack(pack_dir)
    assert pack.manifest["meaningful"] is False  # interpreter times are never a GPU result
    sel = pack.select("moe_routing", {"tokens": 3, "profile": "dsv3"})
    assert sel.how == "exact" and sel.config == winner.config
    # a neighbour whose winner is the default gives this workload's own default
    assert pack.select("moe_routing", {"tokens": 5, "profile": "dsv3"}).how == (
        "default" if winner.is_default else "nearest")
    assert pack.select("moe_routing", {"tokens": 5, "profile": "dsv4-flash"}).how == "default"
    assert tune("lower", "moe-routing", "--target", "sm_90", "--pack", str(pack_dir)) == 0
    # export refuses what would lose something: a pack of another GPU, a folder of other files
    import shutil

    h200 = tmp_path / "h200"
    shutil.copytree(ROOT / "packs" / "nvidia-h200", h200)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    capsys.readouterr()
    for out, needle in ((h200, "holds a pack made on NVIDIA H200"), (tmp_path / "notes", "not a kernel pack")):
        assert tune("export", "--out", str(out), "--db", db) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
    assert runtime.load_pack(h200, allow_other_gpu=True).manifest["fingerprint"]["gpu"] == "NVIDIA H200"
    assert tune("export", "--out", str(pack_dir), "--db", db) == 0  # its own pack: replaced


def test_show_gives_one_row_a_workload_today_s_source_first(tmp_path, capsys):
    """`tune show`: one row per workload, today's source's winner over older ones (marked `*`
    where only an older one exists); --all lists every source's; workloads sorted as numbers;
    long configs numbered below a narrow table."""
    from tuner import registry
    from tuner.store import Environment, Run, Winner, open_store

    db = str(tmp_path / "r.db")
    k = registry.get("moe_routing")
    cur = k.source_hash
    with open_store(db).session() as s:
        env = Environment(fingerprint_hash="h", gpu="NVIDIA H200", cc="9.0", fingerprint={"gpu": "NVIDIA H200"})
        s.add(env)
        s.flush()
        run = Run(kind="tune", kernel="moe_routing", environment_id=env.id, source_hash=cur, settings={})
        s.add(run)
        s.flush()
        cfg = dict(k.default_config(k.workloads[0], Target.of()), num_warps=1)
        for tokens, src, us in ((16, "old", 9.0), (16, cur, 5.0), (4, "old", 7.0), (1024, cur, 30.0)):
            s.add(Winner(kernel="moe_routing", workload_key=f"tokens={tokens},profile=dsv3", environment_id=env.id,
                         workload={"tokens": tokens, "profile": "dsv3"}, config=cfg, median_us=us, p20_us=us,
                         p80_us=us, default_median_us=2 * us, floor_us=None, noise=0.0, is_default=False,
                         meaningful=True, source_hash=src, run_id=run.id))
        s.commit()
    assert tune("show", "moe-routing", "--db", db) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if "dsv3" in ln]
    assert [r.split()[1] for r in rows] == ["4", "16", "1024"], rows  # numeric order
    assert "*" in rows[0] and "*" not in rows[1] and "5.00" in rows[1]  # today's source wins its row
    assert f"* 1 of 3 tuned on an older template source than today's ({cur}): `tune campaign --kernel moe-routing " \
           f"--only stale --db {db}` on that GPU" in out
    assert "[1] " in out and "[2] " not in out  # one config, numbered once below the table
    assert "tuned vs default on NVIDIA H200: median 2.00x, max 2.00x over 3 workloads" in out
    assert tune("show", "moe-routing", "--db", db, "--all") == 0
    out = capsys.readouterr().out
    assert sum("dsv3" in ln for ln in out.splitlines()) == 4 and cur[:8] in out and "source" in out
    # a second environment of the same GPU (say a driver upgrade): rows told apart by its id
    with open_store(db).session() as s:
        env2 = Environment(fingerprint_hash="h2", gpu="NVIDIA H200", cc="9.0", fingerprint={"gpu": "NVIDIA H200"})
        s.add(env2)
        s.flush()
        s.add(Winner(kernel="moe_routing", workload_key="tokens=16,profile=dsv3", environment_id=env2.id,
                     workload={"tokens": 16, "profile": "dsv3"}, config=cfg, median_us=6.0, p20_us=6.0, p80_us=6.0,
                     default_median_us=None, floor_us=None, noise=0.0, is_default=False, meaningful=True,
                     source_hash=cur, run_id=run.id))
        s.commit()
    assert tune("show", "moe-routing", "--db", db) == 0
    out = capsys.readouterr().out
    assert "H200 #1" in out and f"H200 #{env2.id}" in out
    gains = [ln for ln in out.splitlines() if ln.startswith("tuned vs default")]
    assert gains == ["tuned vs default on NVIDIA H200 #1: median 2.00x, max 2.00x over 3 workloads"], gains


def test_progress_bar_counts_earlier_trials_and_never_passes_a_workloads_share(tmp_path, monkeypatch):
    """The bar of `tune <kernel>`: a resumed workload starts at its earlier trials, tries past
    --trials do not run past its share, a skipped workload fills its share; never backwards."""
    import tuner.cli.tune as T
    from tuner.study import Outcome

    seen: list[tuple[float, float]] = []

    class Bar:  # rich's Progress, recording the position after each update
        def __init__(self, *a, **kw):
            self.tasks = {0: type("Task", (), {"completed": 0.0, "total": 0.0})()}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def add_task(self, name, total, **kw):
            self.tasks[0].total = total
            return 0

        def update(self, task, completed=None, advance=None, **kw):
            t = self.tasks[task]
            t.completed = completed if completed is not None else t.completed + (advance or 0)
            seen.append((t.completed, t.total))

    class FakeTuner:  # three workloads: resumed at 2 of 4 with 5 tries, skipped, fresh
        def __init__(self, store, kernel, settings, on_event):
            self.on_event = on_event

        def run(self, workloads):
            ev, out = self.on_event, []
            ev("workload_start", {"workload": "a", "evaluated": 2})
            for _ in range(2 + 5):
                ev("trial", {"workload": "a", "result": type("R", (), {"status": "ok"})(), "best": 1.0})
            for key, new in (("a", 7), ("b", 0)):
                out.append(Outcome(key, 4, new=new))
                ev("workload_done", {"outcome": out[-1]})
            ev("workload_start", {"workload": "c", "evaluated": 0})
            ev("trial", {"workload": "c", "result": type("R", (), {"status": "ok"})(), "best": 1.0})
            out.append(Outcome("c", 1, new=1))
            ev("workload_done", {"outcome": out[-1]})
            return out

    monkeypatch.setattr(T, "Progress", Bar)
    monkeypatch.setattr(T, "Tuner", FakeTuner)
    assert tune("moe-routing", "--tokens", "3,20,64", "--profile", "dsv3", "--trials", "4",
                "--db", str(tmp_path / "r.db")) == 0
    pos = [c for c, _ in seen]
    assert seen[0] == (2, 12) and pos == sorted(pos) and max(pos) == 12 == pos[-1], seen
    assert pos[:8] == [2, 3, 4, 4, 4, 4, 4, 4]  # two new trials reach the share; the tries stay inside it


def test_canonical_workload_keys_pack_entries_and_old_winners_as_the_database_does():
    from kernel_templates.nvfp4_attention import Workload
    from tuner.spec import canonical_workload, workload_key

    w = Workload(16, 32768, 16, "nvfp4", "dense")
    stored_sorted = {"batch": 16, "context": 32768, "heads": 16, "kv_dtype": "nvfp4", "mode": "dense", "page": 64}
    stored_sorted = dict(sorted(stored_sorted.items()))  # a pack file's order
    assert ",".join(f"{a}={v}" for a, v in canonical_workload(Workload, stored_sorted).items()) == workload_key(w)
    before_page = {"mode": "dense", "batch": "16", "context": 32768, "heads": 16, "kv_dtype": "nvfp4"}
    assert canonical_workload(Workload, before_page) == canonical_workload(Workload, stored_sorted)


def test_budget_bounds_the_search_but_every_workload_gets_its_default(tmp_path):
    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--tokens", "1,3", "--profile", "dsv3", "--budget", "0.01s", "--db", db) == 0
    con = sqlite3.connect(db)
    winners = con.execute("SELECT workload_key, is_default FROM tuner_winners ORDER BY workload_key").fetchall()
    searched = con.execute("SELECT COUNT(*) FROM tuner_trials WHERE phase = 'search' AND status != 'pruned'"
                           ).fetchone()[0]
    con.close()
    assert [(k, bool(d)) for k, d in winners] == [("tokens=1,profile=dsv3", True), ("tokens=3,profile=dsv3", True)]
    assert searched == 2  # the two defaults, nothing more: the budget was spent


def _tuned_with_a_fast_hand_written_row(tmp_path, older_source: bool = False):
    """A database where moe_routing tokens=3 was tuned (its default, one trial), then a search
    row of another admitted config, 0.001 us and no percentiles, written by hand (the runs
    marked as of an earlier source with ``older_source``). Returns the database, the workload,
    its default and that other config."""
    from kernel_templates import moe_routing as mr
    from search_spaces import moe_routing as ms
    from tuner.spec import config_key

    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--trials", "1", "--db", db) == 0
    wl = mr.Workload(3, "dsv3")
    default = mr.default_config(wl, INTERPRETER)
    other = next(c for c in ms.SPACE.grid() if c != default and MOE.admits(c, wl, INTERPRETER))
    con = sqlite3.connect(db)
    run_id, wd = con.execute("SELECT run_id, workload FROM tuner_trials").fetchone()
    if older_source:
        con.execute("UPDATE tuner_runs SET source_hash = 'an-older-source'")
    con.execute("INSERT INTO tuner_trials (run_id, kernel, workload_key, workload, config, config_key, phase, status, "
                "median_us, meaningful, created) VALUES (?, 'moe_routing', 'tokens=3,profile=dsv3', ?, ?, ?, 'search', "
                "'ok', 0.001, 0, CURRENT_TIMESTAMP)", (run_id, wd, json.dumps(other), config_key(other)))
    con.commit()
    con.close()
    return db, wl, default, other


def test_retune_after_a_source_change_retimes_the_earlier_best_first(tmp_path):
    """A template change starts a fresh study; its first trials re-time the fastest configs the
    workload measured under the earlier source, so a short search cannot lose them."""
    db, _, default, other = _tuned_with_a_fast_hand_written_row(tmp_path, older_source=True)
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--trials", "2", "--patience", "2",
                "--db", db) == 0
    con = sqlite3.connect(db)
    new = [json.loads(c) for (c,) in con.execute(
        "SELECT t.config FROM tuner_trials t JOIN tuner_runs r ON t.run_id = r.id WHERE r.source_hash != "
        "'an-older-source' AND t.phase = 'search' ORDER BY t.id")]
    con.close()
    # the default first (no row of the new source holds it), then the earlier best
    assert new[:2] == [default, other]


def test_try_measures_the_given_config_right_after_the_default(tmp_path):
    """``--try`` lays each JSON object over the workload's default; the search measures the
    default first and then these, in order, before anything the sampler draws."""
    from kernel_templates import moe_routing as mr
    from search_spaces import moe_routing as ms

    wl = mr.Workload(3, "dsv3")
    default = mr.default_config(wl, INTERPRETER)
    others = [c for c in ms.SPACE.grid() if c != default and MOE.admits(c, wl, INTERPRETER)
              and sum(c[k] != default[k] for k in c) == 1][:2]
    overs = [{k: v for k, v in c.items() if default[k] != v} for c in others]
    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--trials", "3", "--patience", "3",
                *[a for o in overs for a in ("--try", json.dumps(o))], "--db", db) == 0
    con = sqlite3.connect(db)
    tried = [json.loads(c) for (c,) in con.execute("SELECT config FROM tuner_trials WHERE phase = 'search' ORDER BY id")]
    con.close()
    assert tried[:3] == [default, *others]


def test_a_try_the_space_refuses_is_named_not_dropped_in_silence(tmp_path, caplog):
    """A ``--try`` whose values are legal but that the space refuses for a workload (its
    constraints, or its canonical form being another config) is not measured, and the run says
    so with the reason, once a workload (such tries used to vanish without a word)."""
    db = str(tmp_path / "r.db")
    with caplog.at_level("WARNING", logger="tuner.study"):
        assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--trials", "1", "--db", db,
                    "--try", '{"MAX_PROGRAMS": 1024}', "--try", '{"BLOCK_T": 1}') == 0
    msgs = [r.getMessage() for r in caplog.records if "--try" in r.getMessage()]
    assert any('{"MAX_PROGRAMS": 1024}' in m and "constraints" in m for m in msgs), msgs
    assert any('{"BLOCK_T": 1}' in m and "as another config (MAX_PROGRAMS 8 -> 4)" in m for m in msgs), msgs
    assert len(msgs) == 2, msgs


def test_preflight_says_what_a_tune_on_the_target_would_measure(tmp_path, capsys):
    """``--preflight sm_90``: no trial runs and no database is touched; each workload's default
    and tries are judged as the study on that GPU would (exit 1 when one is refused), the tries
    over the pack's entry with ``--pack``: a try the GPU would refuse is caught on this CPU."""
    db = tmp_path / "r.db"
    args = ["moe-routing", "--tokens", "64", "--profile", "dsv3", "--preflight", "sm_90", "--db", str(db)]
    assert tune(*args, "--try", '{"MAX_PROGRAMS": 1024}', "--try", '{"num_warps": 2}') == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "1 refused" in out and not db.exists()
    assert tune(*args, "--try", '{"num_warps": 2}') == 0
    assert "all measured" in capsys.readouterr().out
    mhc = ["mhc", "--op", "seam", "--tokens", "4096", "--dim", "5120", "--preflight", "sm_90",
           "--pack", str(ROOT / "packs" / "nvidia-h200")]
    assert tune(*mhc, "--try", '{"SPLIT_K": 8}', "--try", '{"SPLIT_K": 4, "XY_GROUP": 1}') == 0
    out = capsys.readouterr().out  # laid over the pack's entry (knobs the space no longer has dropped)
    assert out.count("pack entry") == 2 and "all measured" in out
    assert tune(*mhc, "--try", '{"SPLIT_K": 8, "BLOCK_D": 256, "num_stages": 4}') == 1
    assert "1 refused" in capsys.readouterr().out


def test_constraints_are_judged_for_the_target_given():
    """verify-pack and --preflight judge configs for a GPU: fused MoE routing configs of many
    programs are refused for the interpreter (their grid barrier would deadlock there) and
    admitted for sm_90, in the same process, with nothing switched."""
    from kernel_templates.moe_routing import Workload
    from search_spaces.moe_routing import SPACE, constraints
    from tuner.runtime.target import INTERPRETER, Target

    w = Workload(4096, "dsv3")
    admitted = [c for c in SPACE.grid() if c["FUSED"] and constraints(c, w, Target.named("sm_90"))]
    refused_here = [c for c in admitted if not constraints(c, w, INTERPRETER)]
    assert admitted and refused_here, (len(admitted), len(refused_here))


_PREFLIGHT_ALL = r"""
import json, sys
from tuner.cli.main import main
rcs = {f"{k} {t}": main([k, "--preflight", t, "--pack", "packs/nvidia-h200"])
       for k in ("engram", "mhc", "moe-routing", "nvfp4-attention", "sparse-mqa") for t in ("sm_90", "sm_100")}
print(json.dumps(rcs))
"""


def test_every_default_grid_passes_preflight_on_hopper_and_blackwell():
    """Without the interpreter (a clean process, as ``tune --preflight`` runs), every family's default
    grid, planned as an sm_90 / sm_100 GPU would plan it (Gluon defaults on Hopper), is admitted by
    its own search space: the interpreter-side default tests never see the Gluon defaults."""
    from conftest import run_clean

    rcs = run_clean(_PREFLIGHT_ALL)
    assert rcs and all(rc == 0 for rc in rcs.values()), rcs


def test_retune_tries_run_past_trials_over_the_best_so_far(tmp_path):
    """On a re-tune whose trials already reach ``--trials``, each ``--try`` is still measured,
    laid over the workload's fastest config so far, not its default (a re-tune's
    tries were not run at all, and they varied the default instead of the entry)."""
    from search_spaces import moe_routing as ms

    db, wl, default, other = _tuned_with_a_fast_hand_written_row(tmp_path)
    over = next({k: v} for k in ms.SPACE for v in ms.SPACE[k].values()
                if v != other[k] and MOE.admits(dict(other, **{k: v}), wl, INTERPRETER) and dict(other, **{k: v}) != default)
    con = sqlite3.connect(db)
    last = con.execute("SELECT MAX(id) FROM tuner_trials").fetchone()[0]
    con.close()
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--retune", "--trials", "2", "--patience", "1",
                "--try", json.dumps(over), "--db", db) == 0
    con = sqlite3.connect(db)
    new = [json.loads(c) for (c,) in con.execute(
        "SELECT config FROM tuner_trials WHERE phase = 'search' AND id > ? ORDER BY id", (last,))]
    con.close()
    assert new == [dict(other, **over)]  # two trials held already: only the try ran


def test_a_finalist_without_percentiles_has_no_noise_band(tmp_path, monkeypatch):
    """A trial row with a median but no p20/p80 (an older run's, or one written by hand) can be
    the best finalist: its noise band is zero and its percentiles are its median, not a crash
    (with no re-timing the search times decide, so that row is the best deterministically)."""
    from tuner.worker import Worker

    monkeypatch.setattr(Worker, "retime", lambda self, *a, **k: None)  # re-timing failed: the search times
    db, _, _, other = _tuned_with_a_fast_hand_written_row(tmp_path)
    assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--retune", "--trials", "1", "--db", db) == 0
    con = sqlite3.connect(db)
    (cfg, noise, med, p20, p80), = con.execute("SELECT config, noise, median_us, p20_us, p80_us FROM tuner_winners")
    con.close()
    assert json.loads(cfg) == other and med == p20 == p80 == 0.001 and noise >= 0


def test_a_default_outside_the_space_is_reported(tmp_path, monkeypatch, caplog):
    """A default the search space cannot hold is never measured; the study says so (one warning
    a workload) instead of tuning on without it."""
    import logging

    from tuner import registry

    real = registry.Kernel.default_config
    monkeypatch.setattr(registry.Kernel, "default_config", lambda self, w, t: {
        k: v for k, v in real(self, w, t).items() if k != "FUSED" or self.name != "moe_routing"})
    with caplog.at_level(logging.WARNING, logger="tuner.study"):
        assert tune("moe-routing", "--quick", "--tokens", "3", "--profile", "dsv3", "--trials", "1", "--patience", "1",
                    "--db", str(tmp_path / "r.db")) == 0
    assert any("default config is outside the search space" in r.getMessage() for r in caplog.records)


def _count(db: Path, where: str) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT COUNT(*) FROM tuner_trials WHERE {where}").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_killed_study_resumes_without_losing_trials(tmp_path):
    db = tmp_path / "r.db"
    args = [sys.executable, "-m", "tuner.cli.main", "moe-routing", "--quick", "--trials", "5", "--patience", "5",
            "--tokens", "3", "--profile", "dsv3", "--db", str(db)]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    done = "phase = 'search' AND status != 'pruned'"
    t0 = time.time()
    while _count(db, done) < 2 and time.time() - t0 < 300 and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker, mid-study
    proc.wait()
    before = _count(db, done)
    assert before >= 2
    con = sqlite3.connect(db)
    ids_before = {r[0] for r in con.execute("SELECT id FROM tuner_trials")}
    con.close()
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    con = sqlite3.connect(db)
    ids_after = {row[0] for row in con.execute("SELECT id FROM tuner_trials")}
    runs = con.execute("SELECT status FROM tuner_runs ORDER BY id").fetchall()
    winners = con.execute("SELECT COUNT(*) FROM tuner_winners").fetchone()[0]
    running = con.execute("SELECT COUNT(*) FROM trials WHERE state = 'RUNNING'").fetchone()[0]
    con.close()
    assert ids_before <= ids_after  # nothing measured was lost
    assert _count(db, done) == 5  # the second run only did what was missing
    assert [s for (s,) in runs] == ["interrupted", "done"]  # the killed run is marked as such on resume
    assert winners == 1 and running == 0


def test_sampler_with_a_missing_package_is_a_clean_error(monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else real(name, *a))
    assert tune("moe-routing", "--sampler", "gp", "--db", str(tmp_path / "r.db")) == 2
    err = capsys.readouterr().err.strip()
    assert "needs the 'scipy' package" in err and len(err.splitlines()) == 1


from conftest import FakeWorker as _FakeWorker  # noqa: E402


def test_sparse_study_evaluates_its_trials_instead_of_ending_on_rejections(tmp_path, monkeypatch):
    """The study evaluates each draw's canonical form (``Kernel.canonical``): sparse_mqa's space
    pins every top-k path's unused knobs, and uniform draws were admitted about one time in
    a thousand, so a study ended on its rejection streak after a few trials (the interpreter's
    quick run: 3 and 1 evaluated, 91 and 50 pruned). With a worker that only makes up times,
    all 24 trials run and rejections stay rare."""
    import tuner.study

    monkeypatch.setattr(tuner.study, "Worker", _FakeWorker)
    db = tmp_path / "r.db"
    assert tune("sparse-mqa", "--batch", "8", "--context", "32768", "--next-n", "1", "--profile", "dsv32",
                "--trials", "24", "--patience", "100", "--db", str(db)) == 0
    searched = _count(db, "phase = 'search' AND status = 'ok'")
    pruned = _count(db, "phase = 'search' AND status = 'pruned'")
    assert searched >= 24 and pruned < searched, (searched, pruned)


def test_trials_count_the_history_and_the_summary_shows_the_new_ones(tmp_path, monkeypatch):
    """``--trials`` counts a workload's trials in all (earlier runs for the same source and GPU
    included); each outcome says how many this run measured, and the progress bar is only
    advanced for those: a resumed or skipped workload still completes its share."""
    import tuner.study
    from tuner import registry
    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    monkeypatch.setattr(tuner.study, "Worker", _FakeWorker)
    k = registry.get("moe_routing")
    wl = [w for w in k.small_workloads][:1]
    store = open_store(str(tmp_path / "r.db"))

    starts: list[int] = []

    def run(**kw):
        done = []

        def hear(kind, info):
            if kind == "workload_done":
                done.append(info["outcome"])
            elif kind == "workload_start":
                starts.append(info["evaluated"])

        out = Tuner(store, k, Settings(patience=100, **kw), hear).run(wl)
        assert done == out  # the progress bar hears of every workload, skipped ones too
        return out[0]

    first = run(n_trials=3)
    assert (first.evaluated, first.new, first.skipped) == (3, 3, None)
    again = run(n_trials=3)
    assert (again.evaluated, again.new) == (3, 0) and again.skipped
    more = run(n_trials=5, retune=True)
    assert (more.evaluated, more.new, more.skipped) == (5, 2, None)
    assert starts == [0, 3]  # where a resumed workload's bar starts (the skipped one has no start)
    same = run(n_trials=5, retune=True)  # re-times its finalists, searches nothing new
    assert (same.evaluated, same.new, same.skipped) == (5, 0, None) and same.winner_us is not None
    assert [o.new for o in (first, again, more, same)] == [3, 0, 2, 0]  # this run's trials


def test_tune_summary_has_a_trials_new_column(tmp_path, monkeypatch, capsys):
    import tuner.study

    monkeypatch.setattr(tuner.study, "Worker", _FakeWorker)
    db = str(tmp_path / "r.db")
    assert tune("moe-routing", "--tokens", "3", "--profile", "dsv3", "--trials", "2", "--db", db) == 0
    assert tune("moe-routing", "--tokens", "3", "--profile", "dsv3", "--trials", "2", "--db", db) == 0
    out = capsys.readouterr().out
    assert "(new)" in out and "2 (+2)" in out and "2 (+0)" in out, out
    from sqlalchemy import select
    from tuner.store import Run, open_store
    from tuner.timing import TIMING_METHOD

    with open_store(db).session() as s:  # each run says how it timed its trials
        assert [r.settings["timing"] for r in s.scalars(select(Run))] == [TIMING_METHOD] * 2


_LOWER_AS_TARGET = r"""
import json
from kernel_templates import mhc, sparse_mqa
from tuner import registry
from tuner.cli.lower import lower_kernel
from tuner.runtime.target import Target
out = {}
for arch in (90, 100):
    t = Target.named(f"sm_{arch}")
    for name, wl in (("mhc", mhc.Workload("seam", 1024, 5120)), ("sparse_mqa", sparse_mqa.Workload(1, 524288, 1, "dsv32"))):
        k = registry.get(name)
        res = lower_kernel(k, t, [(wl, k.spec.default_config(wl, t))])  # as `tune lower --target` plans and compiles
        out[f"{name} {arch}"] = {r["function"]: sorted(r["classes"]) for r in res}
print(json.dumps(out))
"""


def test_lower_plans_and_specializes_as_the_target():
    # `tune lower --target sm_90` compiles what an H200 runs: the Gluon defaults (mhc's mix kernel
    # compiles only with the JIT's 16-divisible stride specialization, which the signature carries
    # now), TMA key tiles for the sparse scoring; sm_100 plans no sm_90 Gluon kernel
    from conftest import run_clean

    out = run_clean(_LOWER_AS_TARGET, timeout=600)
    assert "_gl_mix_kernel" in out["mhc 90"] and "wgmma" in out["mhc 90"]["_gl_mix_kernel"]
    assert "tma" in out["sparse_mqa 90"]["_gl_score_kernel"]
    assert not any(f.startswith("_gl_") for f in {**out["mhc 100"], **out["sparse_mqa 100"]})
