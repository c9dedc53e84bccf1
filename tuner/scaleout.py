"""Scale-out: one campaign over several worker processes, GPUs and hosts, through one database.

The database is the only meeting point (no scheduler, no protocol of our own). A campaign
row holds what to tune; each environment that joins plans its workloads into claim rows (the
order of ``tuner.campaign.plan``); a worker process per GPU takes the next claim in a short
write transaction (PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED``; SQLite: ``BEGIN
IMMEDIATE``, one host only), tunes that workload through ``tuner.campaign.run`` (Optuna's
studies in the same database) and marks it done. A heartbeat thread renews the worker's lease;
a worker killed outright stops renewing, and once its lease has run out the next worker takes
its claim over: the trials it committed are kept, and the study resumes from them. Ctrl-C
(SIGINT) or SIGTERM gives the claim back at once.

Leases are compared on the database's clock on PostgreSQL (hosts' clocks may differ) and on
the host's clock on SQLite.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, create_engine, event, func, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tuner import campaign as camp
from tuner import registry
from tuner.spec import workload_dict, workload_from_dict
from tuner.store import Campaign, CampaignWorker, Claim, Environment, Run, Store, open_store
from tuner.store.db import _pragmas
from tuner.store.models import utcnow
from tuner.study import Outcome, Settings, ensure_environment

log = logging.getLogger(__name__)

LEASE_S = 60.0
"""How long a claim stays a worker's without a heartbeat: a killed worker's workload waits this
long before another takes it over."""
CREATE_LOCK = 0x74756E65  # PostgreSQL advisory lock taken while a campaign is created
START_METHOD = "spawn"
"""How worker processes start: a fresh interpreter each (CUDA cannot be forked)."""


class ScaleoutError(Exception):
    """A campaign cannot be joined or started as asked (one line for the CLI)."""


@dataclass(frozen=True)
class Taken:
    """A claim this worker holds: the workload and what the plan said of it."""

    id: int
    kernel: str
    workload: dict[str, Any]
    workload_key: str
    state: str
    attempts: int
    taken_from: int | None
    """The worker whose lease ran out, where this is a takeover."""


def db_now(s: Session) -> dt.datetime:
    """Now on the clock leases are compared on (naive UTC)."""
    if s.get_bind().dialect.name == "postgresql":
        return s.execute(text("SELECT clock_timestamp() AT TIME ZONE 'UTC'")).scalar_one()
    return utcnow()


def _outcome_dict(o: Outcome) -> dict[str, Any]:
    return {"workload_key": o.workload_key, "evaluated": o.evaluated, "new": o.new, "winner_us": o.winner_us,
            "default_us": o.default_us, "is_default": o.is_default, "skipped": o.skipped,
            "statuses": dict(o.statuses), "seconds": o.seconds, "final_s": o.final_s, "phases": dict(o.phases)}


class Coordinator:
    """Campaigns, workers and claims in the store: every change a short write transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sqlite = store.engine.dialect.name == "sqlite"
        engine = store.engine
        if self.sqlite:  # BEGIN IMMEDIATE: the write lock first, so two claimers never read the same row free
            engine = create_engine(store.url)

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn, _record):
                _pragmas(dbapi_conn)
                dbapi_conn.isolation_level = None  # the driver's implicit transactions off: BEGIN is ours

            @event.listens_for(engine, "begin")
            def _on_begin(conn):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
        self.Session = sessionmaker(engine, expire_on_commit=False)

    @contextlib.contextmanager
    def tx(self) -> Iterator[Session]:
        """One short write transaction, committed on leaving (rolled back on an error); reads
        that change nothing go through ``store.session()``."""
        with self.Session() as s, s.begin():
            yield s

    # -- campaigns ---------------------------------------------------------------------------
    def create(self, kernels: list[str], states: list[str], settings: dict[str, Any], *,
               lease_s: float = LEASE_S, budget_s: float | None = None) -> Campaign:
        """A new campaign; earlier open ones without a live worker are ``replaced`` (their
        unfinished workloads are planned again here). One with live workers is refused, and so
        is one that another launcher created within its lease and whose workers have not joined
        yet: two launchers started at once make one campaign, not two."""
        with self.tx() as s:
            if not self.sqlite:  # SQLite's BEGIN IMMEDIATE already orders two creators
                s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": CREATE_LOCK})
            now = db_now(s)
            for c in s.scalars(select(Campaign).where(Campaign.status == "open")).all():
                live = self._live_workers(s, c, now)
                if live:
                    raise ScaleoutError(f"campaign {c.id} is running in {self.store.shown_url} ({len(live)} live "
                                        f"worker{'s' if len(live) > 1 else ''} on {', '.join(sorted(live))}): "
                                        "join it with `tune worker` or wait until it ends")
                joined = s.scalar(select(func.count()).select_from(CampaignWorker).where(
                    CampaignWorker.campaign_id == c.id))
                if not joined and c.created > now - dt.timedelta(seconds=c.lease_s):
                    raise ScaleoutError(f"campaign {c.id} was started on {c.host} at {c.created:%H:%M:%S} and its "
                                        f"workers are starting: join it with `tune worker`, or start a new one "
                                        f"after {c.lease_s:g} s")
                c.status, c.finished = "replaced", now
            c = Campaign(host=socket.gethostname(), kernels=kernels, states=states, settings=settings,
                         lease_s=lease_s, deadline=now + dt.timedelta(seconds=budget_s) if budget_s else None,
                         status="open", created=now)
            s.add(c)
        return c

    def campaign(self, campaign_id: int | None = None) -> Campaign:
        """The campaign ``campaign_id``, else the newest one not replaced."""
        with self.store.session() as s:
            q = select(Campaign)
            q = q.where(Campaign.id == campaign_id) if campaign_id is not None else \
                q.where(Campaign.status != "replaced").order_by(Campaign.id.desc()).limit(1)
            c = s.scalar(q)
        if c is None:
            raise ScaleoutError(f"no campaign {campaign_id} in {self.store.shown_url}" if campaign_id is not None else
                                f"no campaign in {self.store.shown_url}: start one with `tune campaign --workers N`")
        if c.status == "replaced":
            raise ScaleoutError(f"campaign {c.id} was replaced by a later one: join that one (leave out --campaign)")
        return c

    def _live_workers(self, s: Session, c: Campaign, now: dt.datetime) -> set[str]:
        """``host/device`` of the campaign's workers whose heartbeat is within the lease."""
        fresh = now - dt.timedelta(seconds=c.lease_s)
        rows = s.execute(select(CampaignWorker.host, CampaignWorker.device).where(
            CampaignWorker.campaign_id == c.id, CampaignWorker.status == "running",
            CampaignWorker.heartbeat > fresh)).all()
        return {f"{h}/{d}" if d else h for h, d in rows}

    def check_host(self, c: Campaign, host: str | None = None) -> None:
        """Refuse a second host on a SQLite file (its locks hold on one host only)."""
        host = host or socket.gethostname()
        if not self.sqlite:
            return
        with self.store.session() as s:
            others = {h.split("/")[0] for h in self._live_workers(s, c, db_now(s))} - {host}
        if others:
            raise ScaleoutError(f"{self.store.shown_url} is a SQLite file: campaign {c.id} runs on "
                                f"{', '.join(sorted(others))}, and workers on a second host need PostgreSQL "
                                "(--db postgresql://...)")

    # -- planning ----------------------------------------------------------------------------
    def plan(self, c: Campaign, env: Environment, grids: list[tuple[registry.Kernel, list[Any]]]) -> int:
        """Claim rows for ``env`` in plan order, unless it has them already: the number of its claims."""
        def count(s: Session) -> int:
            return s.scalar(select(func.count()).select_from(Claim).where(
                Claim.campaign_id == c.id, Claim.environment_id == env.id)) or 0

        with self.store.session() as s:
            if n := count(s):
                return n
        items = camp.plan(self.store, grids, c.states)[: c.settings.get("limit")]
        try:
            with self.tx() as s:
                if n := count(s):  # another worker of this environment planned it meanwhile
                    return n
                for i, it in enumerate(items):
                    s.add(Claim(campaign_id=c.id, environment_id=env.id, seq=i, kernel=it.kernel.name,
                                workload_key=it.key, workload=workload_dict(it.workload), state=it.state,
                                status="pending", attempts=0))
                if items and c.status == "done":
                    s.get(Campaign, c.id).status = "open"  # another GPU joined a finished campaign
        except IntegrityError:  # (a database without the transaction's lock: the other insert won)
            pass
        with self.store.session() as s:
            return count(s)

    # -- workers -----------------------------------------------------------------------------
    def join(self, c: Campaign, env: Environment, device: str) -> int:
        """Register this process as a worker of ``c``; its id."""
        host = socket.gethostname()
        self.check_host(c, host)
        with self.tx() as s:
            now = db_now(s)
            w = CampaignWorker(campaign_id=c.id, host=host, pid=os.getpid(), device=device, gpu=env.gpu,
                               environment_id=env.id, status="running", started=now, heartbeat=now)
            s.add(w)
        return w.id

    def claim(self, c: Campaign, env: Environment, worker_id: int, n: int = 1) -> list[Taken]:
        """The next free claim of ``env`` (pending, or held past its lease) and up to ``n - 1``
        more of the same family and state (one study process serves them in turn), now this
        worker's; [] when none is free."""
        with self.tx() as s:
            now = db_now(s)
            free = and_(Claim.campaign_id == c.id, Claim.environment_id == env.id,
                        or_(Claim.status == "pending", and_(Claim.status == "claimed", Claim.lease_until < now)))
            first = s.scalar(select(Claim).where(free).order_by(Claim.seq).limit(1).with_for_update(skip_locked=True))
            if first is None:
                return []
            rows = [first]
            if n > 1:
                rows += s.scalars(select(Claim).where(free, Claim.kernel == first.kernel, Claim.state == first.state,
                                                      Claim.id != first.id)
                                  .order_by(Claim.seq).limit(n - 1).with_for_update(skip_locked=True)).all()
            taken = []
            for row in rows:
                before = row.worker_id if row.status == "claimed" else None
                if before is not None:
                    self._bury(s, before, now)
                row.status, row.worker_id, row.claimed = "claimed", worker_id, now
                row.lease_until = now + dt.timedelta(seconds=c.lease_s)
                row.attempts += 1
                taken.append(Taken(row.id, row.kernel, dict(row.workload), row.workload_key, row.state,
                                   row.attempts, before))
            return taken

    def _bury(self, s: Session, worker_id: int, now: dt.datetime) -> None:
        """A worker whose lease ran out is lost; its runs still marked running were killed with it."""
        w = s.get(CampaignWorker, worker_id)
        if w is None or w.status != "running":
            return
        w.status, w.finished = "lost", now
        log.warning("worker %d (%s pid %d) stopped renewing its lease: taking its workload over", w.id, w.host, w.pid)
        for r in s.scalars(select(Run).where(Run.status == "running")).all():
            if r.options.get("host") == w.host and r.options.get("pid") == w.pid:
                r.status, r.finished = "interrupted", now

    def start(self, claim_id: int, worker_id: int) -> None:
        """The worker starts on this claim of its batch: ``claimed`` says since when (the newest
        of a worker's claims is the workload it is on)."""
        with self.tx() as s:
            s.execute(update(Claim).where(Claim.id == claim_id, Claim.worker_id == worker_id,
                                          Claim.status == "claimed").values(claimed=db_now(s)))

    def renew(self, c: Campaign, worker_id: int) -> int:
        """Heartbeat: this worker lives, its claims' leases run on; the number of claims it holds,
        -1 where the others judged it lost meanwhile (its lease ran out: its workload was taken over)."""
        with self.tx() as s:
            now = db_now(s)
            w = s.get(CampaignWorker, worker_id)
            if w is None or w.status != "running":
                return -1
            s.execute(update(CampaignWorker).where(CampaignWorker.id == worker_id).values(heartbeat=now))
            return s.execute(update(Claim).where(Claim.worker_id == worker_id, Claim.status == "claimed").values(
                lease_until=now + dt.timedelta(seconds=c.lease_s))).rowcount

    def finish(self, claim_id: int, worker_id: int, outcome: Outcome) -> bool:
        """Mark a claim done with what the study produced; False where it is no longer ours."""
        with self.tx() as s:
            row = s.get(Claim, claim_id)
            if row is None or row.worker_id != worker_id or row.status != "claimed":
                log.warning("claim %d was taken over while this worker tuned it: the other worker records it",
                            claim_id)
                return False
            row.status, row.finished, row.lease_until, row.outcome = "done", db_now(s), None, _outcome_dict(outcome)
            return True

    def release(self, worker_id: int, ids: list[int] | None = None) -> int:
        """Give back the claims this worker holds (all, or those of ``ids``): free at once for
        the others (Ctrl-C)."""
        q = update(Claim).where(Claim.worker_id == worker_id, Claim.status == "claimed")
        if ids is not None:
            q = q.where(Claim.id.in_(ids))
        with self.tx() as s:
            return s.execute(q.values(status="pending", worker_id=None, lease_until=None)).rowcount

    def leave(self, c: Campaign, worker_id: int, status: str) -> None:
        """The worker ends (``done``, ``interrupted``, ``failed``); the campaign is done once
        every claim of every environment is."""
        with self.tx() as s:
            now = db_now(s)
            w = s.get(CampaignWorker, worker_id)
            if w is not None and w.status == "running":
                w.status, w.finished = status, now
            self._close_if_done(s, c, now)

    def settle(self, c: Campaign) -> None:
        """Mark ``c`` done if nothing of it is left (a campaign that planned no workload)."""
        with self.tx() as s:
            self._close_if_done(s, c, db_now(s))

    def _close_if_done(self, s: Session, c: Campaign, now: dt.datetime) -> None:
        left = s.scalar(select(func.count()).select_from(Claim).where(
            Claim.campaign_id == c.id, Claim.status != "done"))
        row = s.get(Campaign, c.id)
        if not left and row.status == "open":
            row.status, row.finished = "done", now

    def outstanding(self, c: Campaign, env: Environment) -> tuple[int, int, int, float | None]:
        """Claims of ``env`` pending and held, live workers of ``env`` (at least 1), and the
        seconds left of the campaign's budget (None: no budget)."""
        with self.store.session() as s:
            now = db_now(s)
            rows = dict(s.execute(select(Claim.status, func.count()).where(
                Claim.campaign_id == c.id, Claim.environment_id == env.id, Claim.status != "done")
                .group_by(Claim.status)).all())
            live = s.scalar(select(func.count()).select_from(CampaignWorker).where(
                CampaignWorker.campaign_id == c.id, CampaignWorker.environment_id == env.id,
                CampaignWorker.status == "running",
                CampaignWorker.heartbeat > now - dt.timedelta(seconds=c.lease_s)))
            left = (c.deadline - now).total_seconds() if c.deadline else None
        return rows.get("pending", 0), rows.get("claimed", 0), max(1, live or 0), left


class _Heartbeat(threading.Thread):
    """Renews the worker's lease every quarter lease until stopped."""

    def __init__(self, coord: Coordinator, c: Campaign, worker_id: int) -> None:
        super().__init__(name="tuner-heartbeat", daemon=True)
        self.coord, self.c, self.worker_id = coord, c, worker_id
        self.halt = threading.Event()
        self.lost = threading.Event()
        """Set once the others judged this worker lost (a beat came too late): it must stop."""

    def run(self) -> None:
        # Ctrl-C and SIGTERM are the main thread's: one the kernel handed to this thread would
        # not interrupt the main thread's wait, and the claim would be given back only later
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        failing = False
        while not self.halt.wait(self.c.lease_s / 4):
            try:
                if self.coord.renew(self.c, self.worker_id) < 0:
                    log.warning("worker %d was judged lost (its lease ran out) and its workload taken over: it "
                                "stops once the trial in hand ends", self.worker_id)
                    self.lost.set()
                    return
                failing = False
            except Exception as e:  # noqa: BLE001 - a database hiccup: try again next beat
                if not failing:
                    log.warning("heartbeat of worker %d failed (trying again): %s", self.worker_id,
                                str(e).splitlines()[0] if str(e) else type(e).__name__)
                failing = True

    def stop(self) -> None:
        self.halt.set()
        self.join(10)


def worker_settings(c: Campaign, gpu: bool) -> Settings:
    """The study settings a campaign asks of each workload (the trial timeout is this host's)."""
    fields = set(Settings.__dataclass_fields__)
    extra = {k: v for k, v in (c.settings.get("tuner") or {}).items() if k in fields}
    return Settings(**{"trial_timeout_s": 120.0 if gpu else 600.0, **extra,
                       "n_trials": int(c.settings.get("n_trials", 16)), "patience": int(c.settings.get("patience", 8))})


def grids_of(c: Campaign, gpu: bool) -> list[tuple[registry.Kernel, list[Any]]]:
    """The grids a campaign covers here: each family's default grid on a GPU, its small one
    through the interpreter."""
    ks = [registry.get(k) for k in c.kernels]
    return [(k, list(k.workloads if gpu else k.small_workloads)) for k in ks]


def work(store: Store, campaign_id: int, *, on_event: Callable[[str, dict[str, Any]], None] | None = None) -> int:
    """Be one worker of the campaign until nothing is left (or its budget is spent): the
    number of workloads this worker finished. KeyboardInterrupt gives the held claim back and
    propagates."""
    from tuner.timing import gpu_available

    hear = on_event or (lambda kind, info: None)
    coord = Coordinator(store)
    c = coord.campaign(campaign_id)
    gpu = gpu_available()
    env = ensure_environment(store)
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "") if gpu else ""
    wid = coord.join(c, env, device)
    settings = worker_settings(c, gpu)
    beat = _Heartbeat(coord, c, wid)
    beat.start()
    done, status = 0, "failed"
    try:
        coord.plan(c, env, grids_of(c, gpu))
        while not beat.lost.is_set():
            pending, held, live, left = coord.outstanding(c, env)
            if left is not None and left <= 0:
                hear("budget_spent", {"left": pending + held})
                break
            # guided: several workloads of one family while much is left (one study process, one
            # start-up for them all), single ones towards the end so that the workers finish together;
            # shared among the workers the launcher started too, before they have all joined
            batch = coord.claim(c, env, wid, batch_size(pending, live, int(c.settings.get("workers") or 1)))
            if not batch:
                if not pending and not held:
                    break
                time.sleep(min(c.lease_s / 4, 1.0))  # the others' leases may run out: stay to take over
                continue
            hear("claimed", {"claims": batch})
            done += _tune_batch(coord, store, wid, batch, settings,
                                None if left is None else left * live * len(batch) / max(1, pending + held), hear,
                                beat.lost)
        status = "lost" if beat.lost.is_set() else "done"
    except WorkerLost:
        status = "lost"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        with _shielded():
            beat.stop()
            if status != "done":
                with contextlib.suppress(Exception):  # the database itself may be what failed
                    coord.release(wid)
            with contextlib.suppress(Exception):
                coord.leave(c, wid, status)
    return done


def batch_size(pending: int, live: int, started: int) -> int:
    """How many pending workloads a worker takes at once: its share of them among the live
    workers, or the workers the launcher started while they are still joining."""
    return max(1, math.ceil(pending / max(1, live, started)))


class WorkerLost(Exception):
    """This worker was judged lost by the others (its heartbeat came too late): it starts nothing more."""


def _tune_batch(coord: Coordinator, store: Store, wid: int, batch: list[Taken], settings: Settings,
                budget_s: float | None, hear: Callable[[str, dict[str, Any]], None],
                lost: threading.Event | None = None) -> int:
    """Tune the claimed workloads in turn, each marked done as it finishes; the number done.
    Any the study did not reach are given back. Once ``lost`` is set no further workload starts."""
    k = registry.get(batch[0].kernel)
    by_key = {t.workload_key: t for t in batch}
    finished: set[int] = set()  # marked done by this worker
    ended: set[int] = set()  # those and the ones taken over meanwhile: none given back

    def finish(o: Outcome) -> None:
        t = by_key.get(o.workload_key)
        if t is not None and t.id not in ended:
            ended.add(t.id)
            if coord.finish(t.id, wid, o):
                finished.add(t.id)
                hear("done", {"claim": t, "outcome": o})

    def heard(kind: str, info: dict[str, Any]) -> None:
        if lost is not None and lost.is_set() and kind in ("workload_start", "trial"):
            raise WorkerLost(f"worker {wid} was judged lost")  # its workload is another worker's now
        if kind == "workload_done":
            finish(info["outcome"])
        elif kind == "workload_start" and (t := by_key.get(info["workload"])) is not None:
            coord.start(t.id, wid)

    items = [camp.Item(k, workload_from_dict(k.spec.workload, t.workload), t.state) for t in batch]
    for o in camp.run(store, items, settings, budget_s=budget_s, on_event=heard):
        finish(o)
    rest = [t.id for t in batch if t.id not in ended]
    if rest:
        coord.release(wid, rest)
    return len(finished)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """SIGINT and SIGTERM held off (main thread only): a second Ctrl-C, or the SIGTERM the
    launcher sends after the terminal's SIGINT, must not cut short giving the claim back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


# -- what a campaign is doing (tune campaign --status, the dashboard) ---------------------------
@dataclass(frozen=True)
class WorkerView:
    id: int
    host: str
    device: str
    gpu: str
    pid: int
    status: str
    workload: str | None
    """``kernel workload_key`` of the claim it holds."""
    heartbeat_s: float
    """Seconds since its last heartbeat."""
    silent: bool
    """Marked running, but its heartbeat is older than the lease: killed or cut off."""


@dataclass(frozen=True)
class FamilyView:
    gpu: str
    kernel: str
    done: int
    claimed: int
    left: int


@dataclass(frozen=True)
class DoneView:
    claim_id: int
    kernel: str
    workload_key: str
    outcome: dict[str, Any]
    worker: str
    """``host/device`` (``host`` through the interpreter) of the worker that finished it."""
    attempts: int


@dataclass(frozen=True)
class CampaignView:
    id: int
    status: str
    host: str
    created: dt.datetime
    kernels: list[str]
    states: list[str]
    settings: dict[str, Any]
    lease_s: float
    budget_left_s: float | None
    workers: list[WorkerView]
    families: list[FamilyView]
    done: list[DoneView]
    """Finished workloads, in the order they finished."""
    planned: dict[str, int]
    """Claims per state the plan found them in (missing, stale, current)."""


def _label(host: str, device: str) -> str:
    return f"{host}/gpu{device}" if device else host


def view(store: Store, campaign_id: int | None = None) -> CampaignView | None:
    """The campaign ``campaign_id`` (default: the newest) as its rows say now; None without one."""
    with store.session() as s:
        q = select(Campaign).order_by(Campaign.id.desc()).limit(1) if campaign_id is None else \
            select(Campaign).where(Campaign.id == campaign_id)
        c = s.scalar(q)
        if c is None:
            return None
        now = db_now(s)
        gpu_of = dict(s.execute(select(Environment.id, Environment.gpu)).all())
        workers = s.scalars(select(CampaignWorker).where(CampaignWorker.campaign_id == c.id)
                            .order_by(CampaignWorker.id)).all()
        claims = s.scalars(select(Claim).where(Claim.campaign_id == c.id).order_by(Claim.seq)).all()
    on: dict[int, Claim] = {}  # each worker's claim it is on: the newest started, the first of its batch before
    for cl in claims:
        if cl.status == "claimed" and (cl.worker_id not in on or cl.claimed > on[cl.worker_id].claimed):
            on[cl.worker_id] = cl
    held = {w: f"{cl.kernel} {cl.workload_key}" for w, cl in on.items()}
    label = {w.id: _label(w.host, w.device) for w in workers}
    wv = [WorkerView(w.id, w.host, w.device, w.gpu, w.pid, w.status, held.get(w.id),
                     (now - w.heartbeat).total_seconds(),
                     w.status == "running" and (now - w.heartbeat).total_seconds() > c.lease_s) for w in workers]
    fam: dict[tuple[str, str], list[int]] = {}
    for cl in claims:
        n = fam.setdefault((gpu_of.get(cl.environment_id, "?"), cl.kernel), [0, 0, 0])
        n[("done", "claimed").index(cl.status) if cl.status in ("done", "claimed") else 2] += 1
    done = sorted((cl for cl in claims if cl.status == "done"), key=lambda cl: (cl.finished, cl.id))
    return CampaignView(
        c.id, c.status, c.host, c.created, list(c.kernels), list(c.states), dict(c.settings), c.lease_s,
        (c.deadline - now).total_seconds() if c.deadline else None, wv,
        [FamilyView(g, k, *n) for (g, k), n in sorted(fam.items())],
        [DoneView(cl.id, cl.kernel, cl.workload_key, dict(cl.outcome or {}), label.get(cl.worker_id, "?"), cl.attempts)
         for cl in done],
        {st: sum(cl.state == st for cl in claims) for st in camp.STATES})


# -- processes ---------------------------------------------------------------------------------
def devices(n: int | None) -> list[str]:
    """Each worker's CUDA_VISIBLE_DEVICES entry: ``n`` of the GPUs given (CUDA_VISIBLE_DEVICES,
    else every visible one), all of them for ``None``; through the interpreter ``n`` (or one)
    workers with no GPU (''). ValueError (one line) when more workers than GPUs are asked."""
    from tuner.timing import gpu_available

    if n is not None and n < 1:
        raise ValueError(f"--workers {n}: at least 1")
    if not gpu_available():
        return [""] * (n or 1)
    import torch

    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in given.split(",") if d.strip()] if given is not None else \
        [str(i) for i in range(torch.cuda.device_count())]
    if n is not None and n > len(ids):
        raise ValueError(f"--workers {n}: only {len(ids)} GPU{'s' if len(ids) != 1 else ''} given "
                         f"({'CUDA_VISIBLE_DEVICES=' + given if given is not None else 'all visible'}): "
                         "one worker per GPU")
    return ids if n is None else ids[:n]


def on_sigterm(_sig: int, _frame: Any) -> None:
    """SIGTERM handled as Ctrl-C."""
    raise KeyboardInterrupt


def worker_main(url: str, campaign_id: int, device: str, threads: int | None = None) -> None:
    """A worker process: pinned to its GPU, SIGTERM as Ctrl-C; exits 0 when done, 130 when
    interrupted, 2 when refused."""
    if device:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    if threads and "OMP_NUM_THREADS" not in os.environ:  # interpreter workers share the CPU's cores
        os.environ["OMP_NUM_THREADS"] = str(threads)
        with contextlib.suppress(Exception):
            import torch

            torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where started with SIGINT ignored (`&`)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        work(open_store(url), campaign_id)
    except KeyboardInterrupt:
        sys.exit(130)
    except ScaleoutError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def launch(url: str, campaign_id: int, devs: list[str]) -> list[Any]:
    """Start one worker process per entry of ``devs`` (``START_METHOD``); the processes."""
    import multiprocessing as mp

    ctx = mp.get_context(START_METHOD)
    threads = max(1, (os.cpu_count() or 1) // len(devs)) if not any(devs) and len(devs) > 1 else None
    procs = [ctx.Process(target=worker_main, args=(url, campaign_id, d, threads), name=f"tuner-worker-{i}")
             for i, d in enumerate(devs)]
    for p in procs:
        p.start()
    return procs


def stop(procs: list[Any], grace_s: float = 2.0, timeout_s: float = 30.0) -> None:
    """After Ctrl-C: the workers have it too where it came from a terminal; those still running
    after ``grace_s`` get SIGTERM (each gives its claim back), those still running after
    ``timeout_s`` are killed."""
    with _shielded():
        end = time.monotonic() + grace_s
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
        for p in procs:
            if p.is_alive() and p.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)
        end = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)
