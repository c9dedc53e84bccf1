"""`tune campaign`: the plan (missing, stale, then current entries), the budget, resume."""
from __future__ import annotations

import sqlite3

import pytest
from conftest import FakeWorker

from tuner import registry
from tuner.cli.main import main


@pytest.fixture
def fake(monkeypatch):
    import tuner.study

    monkeypatch.setattr(tuner.study, "Worker", FakeWorker)


def _plan(db: str, states=("missing", "stale", "current"), grid=None):
    from tuner import campaign
    from tuner.store import open_store

    k = registry.get("moe_routing")
    return campaign.plan(open_store(db), [(k, list(grid or k.small_workloads))], states)


def _run(db: str, items, **kw):
    from tuner import campaign
    from tuner.store import open_store
    from tuner.study import Settings

    return campaign.run(open_store(db), items, Settings(n_trials=2, patience=2, **kw))


def test_missing_then_stale_then_current_fewest_trials_first(tmp_path, fake):
    db = str(tmp_path / "r.db")
    ws = list(registry.get("moe_routing").workloads)[:5]
    assert [it.state for it in _plan(db, grid=ws)] == ["missing"] * 5
    _run(db, _plan(db, grid=ws)[:2])
    assert [it.state for it in _plan(db, grid=ws)] == ["missing"] * 3 + ["current"] * 2
    # one tuned entry's source moves on: it is stale, worked on before the current ones
    con = sqlite3.connect(db)
    con.execute("UPDATE tuner_winners SET source_hash = 'older' WHERE id = (SELECT MIN(id) FROM tuner_winners)")
    con.execute("UPDATE tuner_runs SET source_hash = 'older' WHERE id = (SELECT MIN(run_id) FROM tuner_winners)")
    con.commit()
    con.close()
    assert [it.state for it in _plan(db, grid=ws)] == ["missing"] * 3 + ["stale", "current"]
    assert [it.state for it in _plan(db, ["stale"], grid=ws)] == ["stale"]
    # the rest: every workload ends current, each once, the stale one re-timed from its old winner first
    outs = _run(db, _plan(db, ["missing", "stale"], grid=ws))
    assert len(outs) == 4 and all(o.winner_us for o in outs)
    done = _plan(db, grid=ws)
    assert [it.state for it in done] == ["current"] * 5 and len({it.key for it in done}) == 5


def _stale_with_entry(db: str, monkeypatch):
    """One workload tuned (4 trials), its winner row set to a measured config that is neither the
    default nor the fastest (the pack's entry), then the template's code moves on: stale."""
    import json

    from tuner import campaign
    from tuner.runtime.target import Target
    from tuner.spec import config_key
    from tuner.store import open_store
    from tuner.study import Settings

    k = registry.get("moe_routing")
    w = list(k.small_workloads)[0]
    campaign.run(open_store(db), _plan(db, grid=[w]), Settings(n_trials=4, patience=4))
    dkey = config_key(k.default_config(w, Target.of()))
    con = sqlite3.connect(db)
    ok = [r[0] for r in con.execute("SELECT config FROM tuner_trials WHERE phase = 'search' AND status = 'ok' "
                                    "AND config_key != ? ORDER BY median_us", (dkey,))]
    assert len(ok) >= 2, "the first run measured too few configs"
    entry = ok[-1]  # not the fastest: the winner row, not the best trial, is what the pack holds
    con.execute("UPDATE tuner_winners SET config = ?, is_default = 0", (entry,))
    con.commit()
    con.close()
    monkeypatch.setitem(k.__dict__, "source_hash", "0123456789abcdef")  # the template's code moved on
    assert [it.state for it in _plan(db, ["stale"], grid=[w])] == ["stale"]
    return k, w, dkey, config_key(json.loads(entry))


def _new_keys(db: str) -> list[str]:
    con = sqlite3.connect(db)
    keys = [r[0] for r in con.execute(
        "SELECT t.config_key FROM tuner_trials t JOIN tuner_runs r ON r.id = t.run_id "
        "WHERE t.phase = 'search' AND r.source_hash = '0123456789abcdef' ORDER BY t.id")]
    con.close()
    return keys


def test_stale_entry_retimes_its_old_winner_past_the_budget(tmp_path, fake, monkeypatch):
    """With no time left for a search, a stale entry still measures the config its pack entry
    held next to the default (two trials, not the default alone), and ends current; past the
    budget the two are compared on their search times (no re-timing rounds)."""
    import tuner.study
    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    rounds = []

    class Counted(FakeWorker):
        def retime(self, *a):
            rounds.append(a)
            return super().retime(*a)

    db = str(tmp_path / "r.db")
    k, w, dkey, entry = _stale_with_entry(db, monkeypatch)
    monkeypatch.setattr(tuner.study, "Worker", Counted)
    out = Tuner(open_store(db), k, Settings(n_trials=1, patience=1, budget_s=1e-6)).run([w])
    assert out[0].new == 2 and out[0].winner_us
    assert _new_keys(db) == [dkey, entry] and rounds == []
    assert [it.state for it in _plan(db, grid=[w])] == ["current"]


def test_a_resumed_stale_entry_still_retimes_its_old_winner(tmp_path, fake, monkeypatch):
    """A run killed after the default: the next one, out of budget, measures the old winner
    (it is still stale: no winner under today's source), not nothing."""
    import tuner.study
    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    class Killed(FakeWorker):
        calls = 0

        def evaluate(self, *a):
            Killed.calls += 1
            if Killed.calls > 1:
                raise KeyboardInterrupt
            return super().evaluate(*a)

    db = str(tmp_path / "r.db")
    k, w, dkey, entry = _stale_with_entry(db, monkeypatch)
    monkeypatch.setattr(tuner.study, "Worker", Killed)
    with pytest.raises(KeyboardInterrupt):
        Tuner(open_store(db), k, Settings(n_trials=1, patience=1, budget_s=1e-6)).run([w])
    assert _new_keys(db) == [dkey]
    monkeypatch.setattr(tuner.study, "Worker", FakeWorker)
    out = Tuner(open_store(db), k, Settings(n_trials=1, patience=1, budget_s=1e-6)).run([w])
    assert out[0].new == 1 and _new_keys(db) == [dkey, entry]


def test_a_lost_named_config_lets_nothing_else_run_past_the_budget(tmp_path, fake, monkeypatch):
    """Past the deadline only the first trial and the configs named (default, old winner) are
    measured: where the old winner's queued trial is lost (another run of the study took it),
    the sampler's other candidates do not run on up to --trials."""
    import optuna

    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    db = str(tmp_path / "r.db")
    k, w, dkey, entry = _stale_with_entry(db, monkeypatch)
    real = Tuner._enqueue

    def lose_the_old_winner(study, cfg):
        from tuner.spec import config_key

        if config_key(cfg) != entry:
            real(study, cfg)

    monkeypatch.setattr(Tuner, "_enqueue", staticmethod(lose_the_old_winner))
    import tuner.precompile

    compiled = []
    monkeypatch.setattr(tuner.precompile.Precompiler, "submit", lambda self, wd, cfg: compiled.append(cfg))
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out = Tuner(open_store(db), k, Settings(n_trials=16, patience=16, budget_s=1e-6)).run([w])
    keys = _new_keys(db)  # the sampler may still propose the old winner: then it runs, as named
    assert keys[0] == dkey and set(keys) <= {dkey, entry} and out[0].new == len(keys)
    assert len(compiled) == len(keys)  # the dropped ones are not even compiled ahead


def test_a_resumed_workload_out_of_budget_measures_its_default_not_a_leftover(tmp_path, fake, monkeypatch):
    """A run killed while measuring a workload's default (a tuned neighbour's winner enqueued
    too): the next run, out of budget, measures the default, not another config as its "first
    trial"."""
    import tuner.study
    from tuner.runtime.target import Target
    from tuner.spec import config_key
    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    class Killed(FakeWorker):
        def evaluate(self, *a):
            raise KeyboardInterrupt

    db = str(tmp_path / "r.db")
    k = registry.get("moe_routing")
    ws = list(k.workloads)[:2]
    Tuner(open_store(db), k, Settings(n_trials=6, patience=6)).run([ws[0]])  # a tuned neighbour
    monkeypatch.setattr(tuner.study, "Worker", Killed)
    with pytest.raises(KeyboardInterrupt):
        Tuner(open_store(db), k, Settings(n_trials=6, patience=6, predict=0)).run([ws[1]])
    monkeypatch.setattr(tuner.study, "Worker", FakeWorker)
    out = Tuner(open_store(db), k, Settings(n_trials=6, patience=6, budget_s=1e-6, predict=0)).run([ws[1]])
    con = sqlite3.connect(db)
    keys = [r[0] for r in con.execute("SELECT config_key FROM tuner_trials WHERE phase = 'search' AND workload_key = ?",
                                      (out[0].workload_key,))]
    con.close()
    assert keys == [config_key(k.default_config(ws[1], Target.of()))]


def test_a_refused_try_holds_no_trial_past_the_budget(tmp_path, fake):
    """The configs asked for by name run past the budget; a --try the space would run as another
    config (BLOCK_T 32 for 3 tokens runs as 4) is refused, so it keeps nothing running: past
    the budget the default alone is measured, not the sampler's asks up to --trials."""
    from tuner.runtime.target import Target
    from tuner.store import open_store
    from tuner.study import Settings, Tuner

    k = registry.get("moe_routing")
    w = next(x for x in k.small_workloads if x.tokens < 32)
    nw = 4 if k.default_config(w, Target.of())["num_warps"] == 8 else 8
    s = Settings(n_trials=8, patience=8, budget_s=1e-6, tries=({"BLOCK_T": 32, "num_warps": nw},))
    out = Tuner(open_store(str(tmp_path / "r.db")), k, s).run([w])
    assert out[0].new == 1 and out[0].is_default


def test_current_entries_get_more_trials_fewest_first(tmp_path, fake):
    """Searching current entries further: ``--trials`` counts new trials, and the entries with
    the fewest trials come first."""
    db = str(tmp_path / "r.db")
    assert main(["campaign", "--kernel", "moe-routing", "--trials", "2", "--patience", "5", "--limit", "1",
                 "--db", db]) == 0
    assert main(["campaign", "--kernel", "moe-routing", "--trials", "3", "--patience", "5", "--limit", "2",
                 "--only", "missing", "--db", db]) == 0
    plan = _plan(db, ["current"])
    assert [it.trials for it in plan] == sorted(it.trials for it in plan) and plan[0].trials == 2
    assert main(["campaign", "--kernel", "moe-routing", "--trials", "2", "--patience", "5", "--limit", "1",
                 "--only", "current", "--db", db]) == 0
    assert sorted(it.trials for it in _plan(db, ["current"]))[-1] == 4  # 2 earlier + 2 new


def test_budget_spent_leaves_the_rest_for_the_next_run(tmp_path, fake, capsys):
    db = str(tmp_path / "r.db")
    assert main(["campaign", "--kernel", "moe-routing", "--trials", "2", "--budget", "1s", "--db", db]) == 0
    out = capsys.readouterr().out
    left = len([it for it in _plan(db) if it.state == "missing"])
    assert ("budget spent" in out) == (left > 0)


def test_bad_options_are_one_line(tmp_path, capsys):
    for args, needle in ((["--only", "stal"], "--only"), (["--trials", "0"], "--trials"),
                         (["--limit", "0"], "--limit"), (["--kernel", "nope"], "unknown kernel"),
                         (["--budget", "soon"], "bad duration")):
        assert main(["campaign", *args, "--db", str(tmp_path / "r.db")]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err


def test_dry_run_prints_the_plan_and_tunes_nothing(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["campaign", "--kernel", "engram", "--dry-run", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "missing" in out and "engram" in out
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM tuner_trials").fetchone()[0] == 0


def test_current_entries_stay_together_by_family(tmp_path, fake):
    """Current entries of two families whose priorities alternate are worked family by family
    (the family of the most promising entry first, each in its own order), so one worker
    process serves each family instead of one process a workload."""
    from tuner import campaign
    from tuner.store import open_store
    from tuner.study import Settings

    db = str(tmp_path / "r.db")
    ks = [registry.get("moe_routing"), registry.get("engram")]
    grids = [(k, list(k.small_workloads)[:2]) for k in ks]
    campaign.run(open_store(db), campaign.plan(open_store(db), grids), Settings(n_trials=2, patience=2))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT id, kernel FROM tuner_winners ORDER BY kernel, id").fetchall()
    gaps = {"moe_routing": [10.0, 8.0], "engram": [9.0, 7.0]}  # interleaved: moe, engram, moe, engram
    for kernel in gaps:
        for (wid, _), g in zip([r for r in rows if r[1] == kernel], gaps[kernel]):
            con.execute("UPDATE tuner_winners SET floor_us = median_us / ?, noise = 0 WHERE id = ?", (g, wid))
    con.commit()
    con.close()
    items = campaign.plan(open_store(db), grids, ["current"])
    assert [it.kernel.name for it in items] == ["moe_routing"] * 2 + ["engram"] * 2
    assert [round(it.gap) for it in items] == [10, 8, 9, 7]
