"""One campaign over several worker processes sharing one database (SQLite, and a real
PostgreSQL server from conftest's ``pg_server``): claims and leases, a worker killed outright
mid-trial, Ctrl-C, a second host on SQLite, mixed GPUs, `tune campaign --workers/--status`,
`tune worker`, and every `--db` command on PostgreSQL.

Workers are forked from this process (imports already paid) and measure through a fake
worker; a kill is a real SIGKILL. Leases are a second or two.
"""
from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import re
import signal
import time
from pathlib import Path

import pytest
from conftest import FakeWorker
from sqlalchemy import select

import tuner.study
from tuner import scaleout
from tuner.cli.main import main
from tuner.store import Campaign, CampaignWorker, Claim, Environment, Run, Trial, TrialStatus, Winner, open_store
from tuner.study import ensure_environment

FORK = mp.get_context("fork")
KERNELS = ["moe_routing", "mhc"]  # 5 small workloads
N_TRIALS = 2


class SlowWorker(FakeWorker):
    """A trial takes a little while. Where ``hang_in`` names a file, the first process to reach
    its second trial writes its pid there and stays in that trial (to be killed or interrupted)."""

    hang_in: Path | None = None
    calls = 0
    delay = 0.02

    def evaluate(self, kernel, workload, config, seed):
        SlowWorker.calls += 1
        if SlowWorker.hang_in is not None and SlowWorker.calls == 2:
            try:
                fd = os.open(SlowWorker.hang_in, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                time.sleep(120)
        time.sleep(SlowWorker.delay)
        return super().evaluate(kernel, workload, config, seed)


@pytest.fixture
def slow(monkeypatch):
    monkeypatch.setattr(tuner.study, "Worker", SlowWorker)
    monkeypatch.setattr(SlowWorker, "hang_in", None)
    monkeypatch.setattr(SlowWorker, "calls", 0)
    monkeypatch.setattr(SlowWorker, "delay", 0.02)
    return SlowWorker


def _campaign(db: str, kernels=KERNELS, lease_s: float = 3.0, workers: int = 1) -> int:
    store = open_store(db)
    c = scaleout.Coordinator(store).create(kernels, ["missing", "stale", "current"],
                                           {"n_trials": N_TRIALS, "patience": 100, "workers": workers,
                                            "tuner": {"rounds": 1, "finalists": 2}}, lease_s=lease_s)
    store.engine.dispose()  # nothing of this process's pool reaches the forked workers
    return c.id


def _traced(target, *args) -> None:
    """``target`` in a worker that prints every thread's stack on SIGUSR1 (``_join`` asks before a kill)."""
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    target(*args)


def _planned(db: str, kernel: str, lease_s: float, n: int):
    """A campaign of one family's small grid, planned for this environment in this process (its
    ``n`` claims checked): (store, coordinator, campaign, environment)."""
    cid = _campaign(db, kernels=[kernel], lease_s=lease_s)
    store = open_store(db)
    coord = scaleout.Coordinator(store)
    c, env = coord.campaign(cid), ensure_environment(store)
    assert coord.plan(c, env, scaleout.grids_of(c, False)) == n
    return store, coord, c, env


def _workers(db: str, cid: int, n: int, target=None) -> list:
    procs = [FORK.Process(target=_traced, args=(target or scaleout.worker_main, db, cid, "")) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def _wait_for(path: Path, timeout: float = 60) -> int:
    end = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < end, "no worker reached its second trial"
        time.sleep(0.02)
    return int(path.read_text())


def _held_by(store, pid: int) -> tuple[int, list[int]]:
    """(worker id, claim ids) of the worker process ``pid`` and the claims it holds."""
    with store.session() as s:
        w = s.scalar(select(CampaignWorker).where(CampaignWorker.pid == pid))
        held = s.scalars(select(Claim.id).where(Claim.worker_id == w.id, Claim.status == "claimed")).all()
    assert held
    return w.id, list(held)


def _join(procs, timeout: float = 90) -> list[int]:
    for p in procs:
        p.join(timeout)
        if p.is_alive():  # its stacks go to the test's captured stderr, then it is killed
            os.kill(p.pid, signal.SIGUSR1)
            time.sleep(1)
            p.kill()
            p.join()
    return [p.exitcode for p in procs]


def _optuna_agrees(store) -> int:
    """Optuna's trials and ours account for each other, study by study: each trial we recorded
    is Optuna's trial of that number in the matching state (and value), and Optuna's study holds
    nothing else but a trial copied there by a process killed before it wrote its row (returned:
    their number; a trial cut off inside its measurement never reaches Optuna's study)."""
    import optuna
    from optuna.trial import TrialState

    storage = store.optuna_storage()
    with store.session() as s:
        ours = s.scalars(select(Trial).where(Trial.phase == "search")).all()
    unmatched = 0
    for summary in optuna.get_all_study_summaries(storage):
        kernel, wkey = summary.study_name.split("|")[:2]
        mine = {t.optuna_number: t for t in ours if (t.kernel, t.workload_key) == (kernel, wkey)}
        trials = {t.number: t for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials}
        assert set(mine) <= set(trials), f"{summary.study_name}: trials of ours Optuna does not hold"
        for number, t in trials.items():
            assert t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL), (summary.study_name, t)
            if number in mine:
                want = {TrialStatus.ok: TrialState.COMPLETE, TrialStatus.pruned: TrialState.PRUNED}.get(
                    mine[number].status, TrialState.FAIL)
                assert t.state == want and (t.value == mine[number].median_us or want != TrialState.COMPLETE)
            else:
                unmatched += 1
    return unmatched


def _check_finished(db: str, cid: int, n_claims: int) -> dict:
    """Every workload done once with one winner; no trial lost or recorded twice; Optuna
    agrees. Returns the claims by id."""
    store = open_store(db)
    with store.session() as s:
        claims = {c.id: c for c in s.scalars(select(Claim).where(Claim.campaign_id == cid)).all()}
        winners = s.scalars(select(Winner)).all()
        search = s.scalars(select(Trial).where(Trial.phase == "search")).all()
    assert len(claims) == n_claims and {c.status for c in claims.values()} == {"done"}
    keys = sorted((c.kernel, c.workload_key) for c in claims.values())
    assert sorted((w.kernel, w.workload_key) for w in winners) == keys  # exactly one winner each
    seen: dict[tuple, int] = {}
    for t in search:
        seen[(t.kernel, t.workload_key, t.config_key)] = seen.get((t.kernel, t.workload_key, t.config_key), 0) + 1
    assert max(seen.values()) == 1, "a config recorded twice"
    for c in claims.values():
        measured = [t for t in search if (t.kernel, t.workload_key) == (c.kernel, c.workload_key)
                    and t.status != TrialStatus.pruned]
        assert len(measured) == N_TRIALS == c.outcome["evaluated"], (c.workload_key, len(measured), c.outcome)
    return claims


@pytest.mark.parametrize("backend,n", [("sqlite", 2), ("postgresql", 4)])
def test_a_worker_killed_mid_trial_loses_nothing_and_its_workload_is_finished_by_another(
        backend, n, tmp_path, slow, request):
    db = str(tmp_path / "r.db") if backend == "sqlite" else request.getfixturevalue("pg_db")
    cid = _campaign(db)
    slow.hang_in = tmp_path / "hang"
    procs = _workers(db, cid, n)
    pid = _wait_for(slow.hang_in)
    store = open_store(db)
    wid, held = _held_by(store, pid)
    os.kill(pid, signal.SIGKILL)
    codes = _join(procs)
    assert sorted(codes) == [-signal.SIGKILL] + [0] * (n - 1)
    claims = _check_finished(db, cid, 5)
    assert all(claims[i].worker_id != wid and claims[i].attempts == 2 for i in held)  # finished by others
    with store.session() as s:
        assert s.get(CampaignWorker, wid).status == "lost"
        assert {w.status for w in s.scalars(select(CampaignWorker)).all() if w.id != wid} == {"done"}
        assert s.get(Campaign, cid).status == "done"
        runs = s.scalars(select(Run)).all()
        assert sorted(r.status for r in runs).count("interrupted") == 1
        assert all(r.status == "done" for r in runs if r.settings.get("pid") != pid)
        dead = {r.id for r in runs if r.settings.get("pid") == pid}
        kept = s.scalars(select(Trial).where(Trial.run_id.in_(dead), Trial.phase == "search",
                                             Trial.status == TrialStatus.ok)).all()
    # the trial it finished before the kill is one of the workload's N_TRIALS (checked above)
    assert len(kept) == 1 and kept[0].workload_key in {claims[i].workload_key for i in held}
    assert _optuna_agrees(store) == 0  # the trial it was measuring: in neither


def _claimed(store) -> int:
    with store.session() as s:
        return len(s.scalars(select(Claim.id).where(Claim.status != "pending")).all())


def test_a_one_family_campaign_is_shared_by_the_workers_started_together(tmp_path, slow):
    """The first worker to join does not take the whole family before the others have joined."""
    db = str(tmp_path / "r.db")
    cid = _campaign(db, kernels=["mhc"], workers=2)  # 3 small workloads
    slow.delay = 0.3  # a workload takes a second or more: the second worker is in before a batch ends
    first = _workers(db, cid, 1)
    store, end = open_store(db), time.monotonic() + 60
    while not _claimed(store):  # the first has taken its batch alone, as a worker that started sooner does
        assert time.monotonic() < end
        time.sleep(0.02)
    assert _join(first + _workers(db, cid, 1)) == [0, 0]
    claims = _check_finished(db, cid, 3)
    by_worker: dict[int, int] = {}
    for cl in claims.values():
        by_worker[cl.worker_id] = by_worker.get(cl.worker_id, 0) + 1
    assert sorted(by_worker.values()) == [1, 2], by_worker
    assert [scaleout.batch_size(p, live, 2) for p, live in [(3, 1), (3, 2), (1, 2), (9, 4), (0, 1)]] == [2, 2, 1, 3, 1]


def test_status_names_the_workload_a_worker_is_on_not_the_last_of_its_batch(tmp_path):
    store, coord, c, env = _planned(str(tmp_path / "r.db"), "mhc", lease_s=30.0, n=3)
    wid = coord.join(c, env, "")
    first, second, third = coord.claim(c, env, wid, 3)
    on = lambda: scaleout.view(store, c.id).workers[0].workload  # noqa: E731
    assert on() == f"mhc {first.workload_key}"  # taken, none started yet: the first comes first
    time.sleep(0.01)
    coord.start(second.id, wid)
    assert on() == f"mhc {second.workload_key}"


def test_a_ctrl_c_the_kernel_hands_to_another_thread_stops_a_trial_wait_at_once(monkeypatch):
    """A process-directed SIGINT may land on any thread that does not block it; the main thread
    waiting on the measuring process must still see it within a slice, not when the trial ends."""
    import multiprocessing
    import threading

    from tuner.worker import Worker

    w = Worker(timeout_s=30)
    mine, theirs = multiprocessing.Pipe()  # nobody answers: a trial that runs on and on
    monkeypatch.setattr(w, "_ensure", lambda: None)
    w._conn = mine

    def ctrl_c_here():
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread takes it, not the main one

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # (pytest may run with SIGINT ignored)
    try:
        threading.Thread(target=ctrl_c_here, daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            w._call("evaluate", (), 30)
        assert time.monotonic() - t0 < 2
    finally:
        signal.signal(signal.SIGINT, before)
        theirs.close()


def test_the_heartbeat_thread_leaves_ctrl_c_to_the_main_thread(tmp_path):
    db = str(tmp_path / "r.db")
    cid = _campaign(db, kernels=["moe_routing"], lease_s=30.0)
    store = open_store(db)
    coord = scaleout.Coordinator(store)
    c = coord.campaign(cid)
    wid = coord.join(c, ensure_environment(store), "")
    seen: list[set] = []
    beat = scaleout._Heartbeat(coord, c, wid)
    real_wait = beat.halt.wait
    beat.halt.wait = lambda t: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])) or real_wait(0.01)  # noqa: E731
    beat.start()
    while not seen:
        time.sleep(0.01)
    beat.stop()
    assert {signal.SIGINT, signal.SIGTERM} <= seen[0]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the main thread's: untouched


def test_ctrl_c_gives_the_claim_back_at_once_and_the_next_worker_goes_on(tmp_path, slow):
    db = str(tmp_path / "r.db")
    cid = _campaign(db, kernels=["moe_routing"], lease_s=30.0)  # only the release frees it within the test
    slow.hang_in = tmp_path / "hang"
    (p,) = _workers(db, cid, 1)
    pid = _wait_for(slow.hang_in)
    store = open_store(db)
    wid, held = _held_by(store, pid)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGINT)
    assert _join([p], 20) == [130] and time.monotonic() - t0 < 10
    with store.session() as s:
        assert {(c.status, c.worker_id, c.lease_until) for c in s.scalars(select(Claim)).all()} == \
            {("pending", None, None)}
        assert s.get(CampaignWorker, wid).status == "interrupted"
        assert [r.status for r in s.scalars(select(Run)).all()] == ["interrupted"]
    slow.hang_in = None
    assert _join(_workers(db, cid, 1)) == [0]
    claims = _check_finished(db, cid, 2)
    assert all(claims[i].attempts == 2 for i in held)
    assert _optuna_agrees(store) == 0


def test_sigterm_is_ctrl_c(tmp_path, slow):
    db = str(tmp_path / "r.db")
    cid = _campaign(db, kernels=["moe_routing"], lease_s=30.0)
    slow.hang_in = tmp_path / "hang"
    (p,) = _workers(db, cid, 1)
    pid = _wait_for(slow.hang_in)
    os.kill(pid, signal.SIGTERM)
    assert _join([p], 20) == [130]
    with open_store(db).session() as s:
        assert {c.status for c in s.scalars(select(Claim)).all()} == {"pending"}


def test_a_lease_run_out_is_taken_over_and_the_lost_workers_runs_are_closed(tmp_path):
    """A worker on another host stops renewing: the next claim takes its workload over, marks it
    lost and its run interrupted (its process cannot be looked up from here)."""
    store, coord, c, env = _planned(str(tmp_path / "r.db"), "moe_routing", lease_s=0.2, n=2)
    far = coord.join(c, env, "0")
    (first,) = coord.claim(c, env, far)
    near = coord.join(c, env, "")  # (joined before the other is on another host: SQLite refuses those)
    with store.session() as s:
        w = s.get(CampaignWorker, far)
        w.host, w.pid = "gpu-host-7", 4242
        s.add(Run(kind="tune", kernel="moe_routing", environment_id=env.id, source_hash="x",
                  settings={"host": "gpu-host-7", "pid": 4242}, status="running"))
        s.add(Run(kind="tune", kernel="moe_routing", environment_id=env.id, source_hash="x",
                  settings=[1, 2], status="running"))  # another tool's row: left alone
        s.commit()
    (second,) = coord.claim(c, env, near)
    assert second.id != first.id and second.taken_from is None  # the first is still leased
    assert coord.renew(c, near) == 1
    time.sleep(0.3)
    coord.renew(c, near)  # the near worker lives on; the far one is silent past its lease
    (again,) = coord.claim(c, env, near, 2)  # the one run out, and nothing else is free
    assert (again.id, again.taken_from, again.attempts) == (first.id, far, 2)
    assert coord.claim(c, env, near) == []  # the near worker's own claims are renewed, not free
    with store.session() as s:
        assert s.get(CampaignWorker, far).status == "lost"
        assert [r.status for r in s.scalars(select(Run)).all()] == ["interrupted", "running"]
    assert [w.silent for w in scaleout.view(store, c.id).workers] == [False, False]  # lost is not running
    assert coord.release(near) == 2 and coord.outstanding(c, env)[:2] == (2, 0)
    # several of one family at once (one study process for them), in plan order
    assert [t.id for t in coord.claim(c, env, near, 5)] == [first.id, second.id]


def test_a_worker_judged_lost_while_alive_learns_it_and_starts_nothing_more(tmp_path):
    """A live worker whose beats came too late (a stalled host) had its workload taken over: its
    next beat says so, the heartbeat flags it, and it starts no further workload of its batch."""
    store, coord, c, env = _planned(str(tmp_path / "r.db"), "moe_routing", lease_s=0.2, n=2)
    slow_one = coord.join(c, env, "0")
    held = coord.claim(c, env, slow_one, 2)
    other = coord.join(c, env, "")
    time.sleep(0.3)
    assert len(coord.claim(c, env, other, 2)) == 2  # both taken over: the slow one is judged lost
    assert coord.renew(c, slow_one) == -1
    beat = scaleout._Heartbeat(coord, c, slow_one)
    beat.start()
    assert beat.lost.wait(5)
    beat.join(5)
    assert not beat.is_alive()  # it stopped beating
    with pytest.raises(scaleout.WorkerLost):
        scaleout._tune_batch(coord, store, slow_one, held, scaleout.worker_settings(c, False), None,
                             lambda kind, info: None, beat.lost)
    with store.session() as s:  # it measured nothing after it was judged lost
        assert s.scalars(select(Trial)).all() == []
        assert [r.status for r in s.scalars(select(Run))] in ([], ["interrupted"])


def test_a_worker_judged_lost_mid_workload_stops_once_the_trial_in_hand_ends(tmp_path, monkeypatch):
    """The host stalls during a workload's first trial and another worker takes the claim over:
    once that trial ends the lost worker measures nothing more of it and counts nothing done."""
    import dataclasses
    import threading

    store, coord, c, env = _planned(str(tmp_path / "r.db"), "moe_routing", lease_s=0.2, n=2)
    slow_one = coord.join(c, env, "0")
    held = coord.claim(c, env, slow_one, 1)
    lost = threading.Event()
    calls = []

    class Stalled(FakeWorker):
        def evaluate(self, *a, **kw):
            calls.append(lost.is_set())
            if len(calls) == 1:  # the host stalls past its lease; another worker takes the claim over
                time.sleep(0.3)
                other = coord.join(c, env, "")
                assert [t.id for t in coord.claim(c, env, other, 1)] == [held[0].id]
                assert coord.renew(c, slow_one) == -1
                lost.set()  # what the heartbeat sets at its next beat
            return super().evaluate(*a, **kw)

    monkeypatch.setattr("tuner.study.Worker", Stalled)
    settings = dataclasses.replace(scaleout.worker_settings(c, False), n_trials=12, patience=100)
    with pytest.raises(scaleout.WorkerLost):
        scaleout._tune_batch(coord, store, slow_one, held, settings, None, lambda kind, info: None, lost)
    assert calls == [False]  # nothing measured after the trial in hand
    with store.session() as s:
        assert [r.status for r in s.scalars(select(Run))] == ["interrupted"]
        claim = s.get(Claim, held[0].id)
        assert claim.status == "claimed" and claim.worker_id != slow_one  # the other worker's


def _as_other_gpu(db: str, cid: int, device: str) -> None:
    """A worker whose GPU is another (its fingerprint says an H100)."""
    import tuner.device

    real = tuner.device.gpu_identity()
    tuner.device.gpu_identity = lambda: {**real, "gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sms": 132}
    scaleout.worker_main(db, cid, device)


def test_mixed_gpus_each_plan_their_own_workloads_and_record_trials_under_their_own_environment(tmp_path, slow):
    db = str(tmp_path / "r.db")
    cid = _campaign(db, kernels=["moe_routing"])
    procs = _workers(db, cid, 1) + _workers(db, cid, 1, target=_as_other_gpu)
    assert _join(procs) == [0, 0]
    store = open_store(db)
    with store.session() as s:
        gpu = dict(s.execute(select(Environment.id, Environment.gpu)).all())
        claims = s.scalars(select(Claim)).all()
        workers = {w.id: w for w in s.scalars(select(CampaignWorker)).all()}
        runs = s.scalars(select(Run)).all()
        trials = s.scalars(select(Trial)).all()
        winners = s.scalars(select(Winner)).all()
    assert sorted(gpu.values()) == ["NVIDIA H100 80GB HBM3", "cpu-interpreter"]
    assert sorted(gpu[c.environment_id] for c in claims) == ["NVIDIA H100 80GB HBM3"] * 2 + ["cpu-interpreter"] * 2
    assert all(workers[c.worker_id].environment_id == c.environment_id for c in claims)
    env_of_run = {r.id: r.environment_id for r in runs}
    by_pid = {w.pid: w.environment_id for w in workers.values()}
    assert all(env_of_run[r.id] == by_pid[r.settings["pid"]] for r in runs)
    assert {env_of_run[t.run_id] for t in trials} == set(gpu)
    assert sorted(gpu[w.environment_id] for w in winners) == sorted(gpu[c.environment_id] for c in claims)


def test_a_second_host_on_sqlite_is_refused_with_one_line(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    cid = _campaign(db)
    store = open_store(db)
    env = ensure_environment(store)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    with store.session() as s:
        s.add(CampaignWorker(campaign_id=cid, host="gpu-host-7", pid=1, device="0", gpu="NVIDIA H200",
                             environment_id=env.id, status="running", started=now, heartbeat=now))
        s.commit()
    assert main(["worker", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SQLite" in err and "gpu-host-7" in err and "PostgreSQL" in err
    with pytest.raises(scaleout.ScaleoutError):
        scaleout.Coordinator(store).join(scaleout.Coordinator(store).campaign(), env, "")
    # a new campaign while that one has a live worker: refused too
    assert main(["campaign", "--workers", "1", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"campaign {cid} is running" in err and "tune worker" in err


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_launchers_at_once_make_one_campaign(tmp_path, request, backend):
    import threading

    db = str(tmp_path / "r.db") if backend == "sqlite" else request.getfixturevalue("pg_db")
    open_store(db).engine.dispose()  # schema made before the race
    gate, made, refused = threading.Barrier(4), [], []

    def launch():
        coord = scaleout.Coordinator(open_store(db))
        gate.wait()
        try:
            made.append(coord.create(KERNELS, ["missing"], {"n_trials": 1}, lease_s=0.5).id)
        except scaleout.ScaleoutError as e:
            refused.append(str(e))

    threads = [threading.Thread(target=launch) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(made) == 1 and len(refused) == 3, (made, refused)
    assert all(f"campaign {made[0]} was started" in r and "tune worker" in r for r in refused)
    with open_store(db).session() as s:
        assert [c.status for c in s.scalars(select(Campaign)).all()] == ["open"]
    time.sleep(0.6)  # its workers never came: once the lease runs out a new launcher replaces it
    later = scaleout.Coordinator(open_store(db)).create(KERNELS, ["missing"], {"n_trials": 1}, lease_s=0.5)
    with open_store(db).session() as s:
        assert s.get(Campaign, made[0]).status == "replaced" and s.get(Campaign, later.id).status == "open"


def test_real_kernels_four_spawned_workers_one_killed_mid_trial_on_postgresql(pg_db, capsys):
    """`tune campaign --workers 4` as a user runs it: spawned workers, the interpreter's kernels,
    a PostgreSQL server; one worker is killed outright once it is into its workload's trials."""
    import threading

    store = open_store(pg_db)
    killed: dict[str, int] = {}

    def kill_one_mid_trial():
        end = time.monotonic() + 300
        while time.monotonic() < end and not killed:
            with store.session() as s:
                busy = {w.pid: w.id for w in s.scalars(select(CampaignWorker).where(
                    CampaignWorker.status == "running")) if s.scalar(select(Claim.id).where(
                        Claim.worker_id == w.id, Claim.status == "claimed").limit(1))}
                runs = {r.id: r.settings.get("pid") for r in s.scalars(select(Run).where(Run.status == "running"))}
                for t in s.scalars(select(Trial).where(Trial.run_id.in_(runs), Trial.phase == "search")):
                    if runs[t.run_id] in busy:  # a trial done in this workload: it is into the next
                        killed.update(pid=runs[t.run_id], worker=busy[runs[t.run_id]])
                        os.kill(killed["pid"], signal.SIGKILL)
                        return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one_mid_trial, daemon=True)
    killer.start()
    rc = main(["campaign", "--workers", "4", "--kernel", "moe-routing", "--kernel", "mhc", "--trials", str(N_TRIALS),
               "--quick", "--lease", "5s", "--db", pg_db])  # --quick: 2 finalists re-timed once (the kill's point holds)
    killer.join(5)
    err = capsys.readouterr().err
    assert killed, "no worker was killed"
    assert rc == 1 and "was killed by SIGKILL" in err, err
    claims = _check_finished(pg_db, 1, 5)
    with store.session() as s:
        assert s.get(CampaignWorker, killed["worker"]).status == "lost"
        assert {w.status for w in s.scalars(select(CampaignWorker)) if w.id != killed["worker"]} == {"done"}
        assert s.get(Campaign, 1).status == "done"
    assert all(c.worker_id != killed["worker"] for c in claims.values())  # its workloads finished by others
    assert any(c.attempts == 2 for c in claims.values())
    assert _optuna_agrees(store) <= 1  # a trial copied to Optuna's study, if the kill came before its row


def test_a_second_host_joins_on_postgresql(pg_db):
    cid = _campaign(pg_db)
    store = open_store(pg_db)
    coord = scaleout.Coordinator(store)
    c = coord.campaign(cid)
    coord.join(c, ensure_environment(store), "")
    coord.check_host(c, "gpu-host-7")  # no refusal: PostgreSQL's locks hold across hosts


def test_cli_workers_status_and_worker(tmp_path, monkeypatch, capsys, slow):
    monkeypatch.setattr(scaleout, "START_METHOD", "fork")
    db = str(tmp_path / "r.db")
    assert main(["campaign", "--workers", "2", "--kernel", "moe-routing", "--trials", "2", "--lease", "2s",
                 "--db", db]) == 0
    out = capsys.readouterr().out
    assert "campaign 1 on 2 workers on the interpreter" in out and "2 workloads (2 missing)" in out
    assert "[2/2] moe_routing" in out and "tune worker --db" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("[2/2] moe_routing"))
    assert re.search(r"trials \(\+\d\), best .*; \d+\.\d s(: |\s)", line), line  # its seconds and their phases
    assert main(["campaign", "--status", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "campaign 1: done" in out and out.count("cpu-interpreter") >= 3 and "moe_routing" in out
    assert main(["worker", "--db", db]) == 0
    assert "nothing is left" in capsys.readouterr().out
    # a second campaign of current entries (search further) joined by `tune worker`
    store = open_store(db)
    cid = scaleout.Coordinator(store).create(["moe_routing"], ["current"], {"n_trials": 1, "patience": 5},
                                             lease_s=2.0).id
    store.engine.dispose()
    assert main(["worker", "--workers", "1", "--db", db]) == 0
    assert f"joining campaign {cid}" in capsys.readouterr().out
    with open_store(db).session() as s:
        assert [c.status for c in s.scalars(select(Claim).where(Claim.campaign_id == cid))] == ["done"] * 2
    from tuner.dashboard.report import build_report

    page = build_report(open_store(db))
    assert f"Campaign {cid}" in page and "moe_routing" in page
    for args, needle in ((["campaign", "--workers", "0"], "at least 1"), (["campaign", "--workers", "some"], "--workers"),
                         (["campaign", "--workers", "2", "--lease", "soon"], "bad duration"),
                         (["worker", "--campaign", "99"], "no campaign 99")):
        assert main([*args, "--db", db]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1, err
    assert main(["worker", "--db", str(tmp_path / "new.db")]) == 2
    assert "tune campaign --workers" in capsys.readouterr().err


def test_campaign_quick_re_times_fewer_finalists_in_fewer_rounds(tmp_path, monkeypatch):
    """`tune campaign --quick` searches as `tune <family> --quick` does: 2 finalists re-timed in
    1 round, 4 trials and patience 3 unless --trials / --patience say otherwise; with --workers the
    campaign carries them to each worker's settings. Without it, the defaults (3 finalists, 3 rounds)."""
    from tuner import campaign as camp
    from tuner.cli import scaleout as scaleout_cli
    from tuner.study import Settings

    asked: list[Settings] = []
    monkeypatch.setattr(camp, "run", lambda store, items, settings, **kw: asked.append(settings))
    monkeypatch.setattr(scaleout_cli, "watch", lambda *a: 0)  # the campaign as planned; no worker started
    got = []
    for i, extra in enumerate((["--quick"], ["--quick", "--trials", "2", "--patience", "5"], [])):
        db = str(tmp_path / f"r{i}.db")
        assert main(["campaign", "--kernel", "moe-routing", "--limit", "1", *extra, "--db", db]) == 0
        assert main(["campaign", "--workers", "2", "--kernel", "moe-routing", *extra, "--db", db + "w"]) == 0
        store = open_store(db + "w")
        worker = scaleout.worker_settings(scaleout.Coordinator(store).campaign(None), False)
        got.append((asked[-1].n_trials, asked[-1].patience, asked[-1].finalists, asked[-1].rounds))
        assert (worker.n_trials, worker.patience, worker.finalists, worker.rounds) == got[-1]
    assert got == [(4, 3, 2, 1), (2, 5, 2, 1), (16, 8, 3, 3)]
    assert (Settings.quick().finalists, Settings.quick().rounds) == (2, 1)


def test_every_db_command_on_postgresql(pg_db, monkeypatch, capsys, tmp_path, slow):
    import tuner.revalidate

    monkeypatch.setattr(scaleout, "START_METHOD", "fork")
    monkeypatch.setattr(tuner.revalidate, "Worker", FakeWorker)
    assert main(["moe-routing", "--tokens", "3", "--profile", "dsv3", "--trials", "2", "--db", pg_db]) == 0
    assert main(["campaign", "--workers", "2", "--kernel", "mhc", "--trials", "1", "--limit", "2", "--lease", "2s",
                 "--db", pg_db]) == 0
    assert main(["show", "moe-routing", "--db", pg_db]) == 0
    assert "tokens" in capsys.readouterr().out
    assert main(["export", "--out", str(tmp_path / "pack"), "--db", pg_db]) == 0
    assert main(["verify-pack", str(tmp_path / "pack")]) == 0
    assert main(["revalidate", "--db", pg_db]) == 0
    assert main(["regressions", "--db", pg_db]) == 0
    assert main(["dashboard", "--out", str(tmp_path / "d.html"), "--db", pg_db]) == 0
    assert main(["campaign", "--status", "--db", pg_db]) == 0
    assert "campaign 1: done" in capsys.readouterr().out
    assert "Campaign 1" in (tmp_path / "d.html").read_text()


def test_budget_spent_leaves_the_rest_pending_and_a_new_campaign_replaces_it(tmp_path, monkeypatch, capsys, slow):
    monkeypatch.setattr(scaleout, "START_METHOD", "fork")
    db = str(tmp_path / "r.db")
    assert main(["campaign", "--workers", "1", "--kernel", "moe-routing", "--kernel", "mhc", "--trials", "2",
                 "--budget", "1s", "--lease", "2s", "--db", db]) == 0
    out = capsys.readouterr().out
    with open_store(db).session() as s:
        left = s.scalars(select(Claim).where(Claim.status != "done")).all()
        assert {c.status for c in left} <= {"pending"}
        assert ("budget spent" in out) == bool(left) and s.get(Campaign, 1).status == ("open" if left else "done")
    assert main(["campaign", "--workers", "1", "--kernel", "moe-routing", "--trials", "2", "--lease", "2s",
                 "--db", db]) == 0
    with open_store(db).session() as s:
        assert s.get(Campaign, 1).status == ("replaced" if left else "done")
        assert s.get(Campaign, 2).status == "done"


def test_schema_0004_adds_the_campaign_tables_and_keeps_every_row(tmp_path, monkeypatch):
    import sqlite3

    from sqlalchemy import create_engine, inspect

    from tuner import registry
    from tuner.store import Store
    from tuner.store.db import _sqlite_pragmas, current_revision, head_revision, upgrade
    from tuner.study import Settings, Tuner

    db = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{db}")
    _sqlite_pragmas(engine)
    upgrade(engine, "0003")  # a database of the schema before campaigns, with a tuned workload in it
    monkeypatch.setattr(tuner.study, "Worker", FakeWorker)
    k = registry.get("moe_routing")
    Tuner(Store(f"sqlite:///{db}", engine), k, Settings.quick(n_trials=2)).run(list(k.small_workloads)[:1])
    engine.dispose()

    def counts() -> dict[str, int]:
        con = sqlite3.connect(db)
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {n: con.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
        con.close()
        return out

    before = counts()
    assert current_revision(create_engine(f"sqlite:///{db}")) == "0003" and "tuner_claims" not in before
    store = open_store(str(db))
    assert current_revision(store.engine) == head_revision()
    assert {"tuner_campaigns", "tuner_workers", "tuner_claims"} <= set(inspect(store.engine).get_table_names())
    after = counts()
    assert before["tuner_trials"] > 0 and before["trials"] > 0 and before["tuner_winners"] == 1
    assert {n: after[n] for n in before} == before


@pytest.mark.parametrize("sql", ["UPDATE tuner_campaigns SET settings = '[1]'",
                                 "UPDATE tuner_campaigns SET kernels = '5'",
                                 "UPDATE tuner_campaigns SET lease_s = 'abc'"])
def test_a_bad_campaign_row_leaves_the_dashboard_up_and_status_one_line(tmp_path, sql, capsys):
    """Another tool's campaign row: the dashboard shows the rest and lists it as unreadable;
    `campaign --status` says in one line that a row does not decode (exit 2)."""
    import sqlite3

    from tuner.cli.main import main
    from tuner.dashboard.report import build_report

    db = str(tmp_path / "r.db")
    _campaign(db)
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()
    page = build_report(open_store(db, create=False))
    assert "newest campaign" in page and "unreadable" in page
    rc = main(["campaign", "--status", "--db", db])
    err = capsys.readouterr().err
    assert rc == 2 and "does not decode" in err and "\n" not in err.strip(), (rc, err)


def test_the_summary_counts_a_workload_without_an_entry_apart():
    """A workload with nothing measured (skipped, or every config refused) is neither tuned nor
    kept at its default: the campaign's summary counts it under "no entry"."""
    from rich.console import Console

    from tuner.cli.scaleout import summary
    from tuner.study import Outcome

    outs = [("moe_routing", Outcome("a", 3, winner_us=5.0, default_us=10.0, is_default=False)),
            ("moe_routing", Outcome("b", 1, winner_us=8.0, default_us=8.0, is_default=True)),
            ("moe_routing", Outcome("c", 0, winner_us=None, default_us=None, skipped="needs 140 GB"))]
    console = Console(width=200, record=True)
    console.print(summary(outs, "campaign"))
    row = [ln for ln in console.export_text().splitlines() if "moe_routing" in ln][0]
    assert [c.strip() for c in row.strip("│ ").split("│")] == ["moe_routing", "3", "1", "1", "1", "2.00x"]
