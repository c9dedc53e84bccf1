"""Test setup: without a GPU every kernel runs through Triton's CPU interpreter.

TRITON_INTERPRET must be set before any kernel module is imported, so it is set here.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch

HAS_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
if not HAS_GPU:
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

DEVICE = "cuda" if HAS_GPU else "cpu"


def _quicker_interpreter() -> bool:
    """Two of the interpreter's per-operation costs made smaller, in this process only (kernel
    results unchanged; processes the tests start run the interpreter as it is). The dtype lookup
    (``_get_np_dtype``) built a dict of every dtype on each call: the same answers come from a
    cache. ``_patch_builtin`` (on each launch and on each call of a jit function inside it, once
    an element for a ``tl.reduce`` with a jit combine function) listed a module's members with
    ``inspect.getmembers``: the names are listed once, each looked up again at every call, so the
    same members are patched. Both checked against the originals first: any difference (another
    Triton) leaves the interpreter as it is. About a third of the time of interpreted tests."""
    import inspect

    import numpy as np
    import triton.language as tl

    try:
        from triton.runtime import interpreter as I

        orig_dtype, patch_attr = I._get_np_dtype, I._patch_attr
        orig_patch = I._patch_builtin
    except (ImportError, AttributeError):
        return False
    u64 = np.dtype(np.uint64)
    known: dict = {}

    def get_np_dtype(tt_dtype):
        if isinstance(tt_dtype, tl.block_type):  # as the original: its element's (pointers: uint64)
            tt_dtype = tt_dtype.element_ty
        if isinstance(tt_dtype, tl.pointer_type):
            return u64
        try:
            return known[tt_dtype]
        except (KeyError, TypeError):
            pass
        np_dtype = orig_dtype(tt_dtype)
        try:
            known[tt_dtype] = np_dtype
        except TypeError:  # unhashable: asked of the original each time
            pass
        return np_dtype

    names: dict = {}
    missing = object()

    def patch_builtin(pkg, builder, scope):
        listed = names.get(pkg)
        if listed is None:
            listed = names[pkg] = [name for name, _ in inspect.getmembers(pkg)]
        for name in listed:
            member = getattr(pkg, name, missing)
            if member is not missing and tl.core.is_builtin(member):
                patch_attr(pkg, name, member, builder, scope)

    # the same answers as the originals, or nothing changes
    scalars = [tl.int1, tl.float16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32,
               tl.uint32, tl.int64, tl.uint64, tl.bfloat16, tl.float8e5, tl.float8e4nv]
    types = scalars + [tl.pointer_type(tl.float32), tl.block_type(tl.int32, [4]),
                       tl.block_type(tl.pointer_type(tl.int8), [2, 2])]
    if any(get_np_dtype(t) != orig_dtype(t) for t in types):
        return False
    for pkg in (tl, tl.core, tl.tensor, tl.math, tl.core.tensor_descriptor_base):
        a, b = I._LangPatchScope(), I._LangPatchScope()
        orig_patch(pkg, None, a)
        a_names = [name for _, name, _ in a._changes]
        a.restore()
        patch_builtin(pkg, None, b)
        b_names = [name for _, name, _ in b._changes]
        b.restore()
        if a_names != b_names or not a_names:
            return False
    I._get_np_dtype, I._patch_builtin = get_np_dtype, patch_builtin
    return True


if not HAS_GPU:
    _quicker_interpreter()


def _shared_alembic_revisions() -> bool:
    """Each new database's set-up loads every Alembic migration script again: Optuna's storage
    (``RDBStorage``) builds a ``ScriptDirectory`` for each of up to three questions (its head,
    the stamp of a new database, the compatibility check), ``tuner.store`` one for its upgrade
    and its head, and each executes every version file anew (about 0.05 s for Optuna's). Here
    the ``ScriptDirectory`` objects over the same version folders (same files, sizes and times)
    share one revision map, loaded once in this process (and in the processes forked from it):
    the Script objects one long-lived ``ScriptDirectory`` would hand out; ``env.py`` still runs
    at every upgrade. Checked first: heads, bases and the walk of revisions of Optuna's and
    tuner's migrations equal a fresh load's, or nothing changes."""
    import importlib.util
    import threading

    try:
        from alembic.script import ScriptDirectory

        from tuner.store.db import MIGRATIONS

        orig_init = ScriptDirectory.__init__
        ScriptDirectory._version_locations, ScriptDirectory._load_revisions  # noqa: B018 - both used
        optuna_dirs = importlib.util.find_spec("optuna").submodule_search_locations
        folders = [str(Path(optuna_dirs[0]) / "storages" / "_rdb" / "alembic"), str(MIGRATIONS)]
    except (ImportError, AttributeError, TypeError, IndexError):
        return False
    maps: dict = {}
    lock = threading.Lock()

    def key(sd) -> tuple | None:
        if sd.recursive_version_locations:
            return None
        parts: list = [sd.sourceless]
        for loc in sd._version_locations:
            try:
                files = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in os.scandir(loc) if e.is_file())
            except OSError:
                return None
            parts.append((str(loc), tuple(files)))
        return tuple(parts)

    def init(self, *a, **kw):
        orig_init(self, *a, **kw)
        k = key(self)
        if k is not None:
            with lock:
                self.revision_map = maps.setdefault(k, self.revision_map)

    def facts(sd) -> tuple:
        return (sd.get_heads(), sd.get_bases(),
                [(r.revision, r.down_revision, r.path) for r in sd.walk_revisions()])

    try:
        fresh = [facts(ScriptDirectory(d)) for d in folders]
        ScriptDirectory.__init__ = init
        first = [ScriptDirectory(d) for d in folders]
        again = [ScriptDirectory(d) for d in folders]
        if fresh != [facts(sd) for sd in again] or any(a.revision_map is not b.revision_map
                                                     for a, b in zip(first, again)):
            raise ValueError("not the same revisions")
    except Exception:  # noqa: BLE001 - another Alembic: as it is
        ScriptDirectory.__init__ = orig_init
        return False
    return True


_shared_alembic_revisions()

# Under pytest-xdist (the test command runs one worker per core) each worker keeps to one
# core: torch's intra-op threads would otherwise oversubscribe the machine.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# CI must be deterministic: property tests replay the same examples there (CI=true);
# elsewhere they explore new ones every run, and a failure found that way becomes a test.
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    return DEVICE


ROOT = Path(__file__).resolve().parents[1]


def clean_env() -> dict[str, str]:
    """Environment of a child process that compiles kernels for a GPU target: this one's
    without TRITON_INTERPRET (the interpreter swaps jit functions for wrappers
    ``triton.compile`` cannot take), the repository first on PYTHONPATH (the caller's entries
    stay: they may name the Triton under test), FP fusion on as here."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return env


def run_clean(code: str, *args: str, timeout: int = 600) -> Any:
    """Run ``code`` (``python -c``, with ``args``) in a clean process from the repository root;
    assert it succeeded and return the JSON its last line of output prints."""
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


class FakeWorker:
    """Stands in for the isolated worker: a made-up time per config, no kernel run."""

    def __init__(self, timeout_s: float = 0, reps: int = 0, **options: Any) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    @staticmethod
    def _us(config: dict) -> float:
        import zlib

        return 10.0 + zlib.crc32(json.dumps(config, sort_keys=True).encode()) % 1000 / 100

    def evaluate(self, kernel, workload, config, seed):
        from tuner.spec import TrialResult

        t = self._us(config)
        return TrialResult("ok", t, 0.99 * t, 1.01 * t, meaningful=False)

    def retime(self, kernel, workload, configs, rounds, seed):
        return [[[self._us(c), 0.99 * self._us(c), 1.01 * self._us(c)]] * rounds for c in configs]


# -- PostgreSQL: one throwaway server per session -------------------------------------------
def _bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server():
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    pytest.importorskip("psycopg", reason="psycopg not installed: pip install 'tuner[postgres]'")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        user = next((u for u in ("postgres", "nobody") if _uid(u) is not None), None)
        if user is None or not shutil.which("runuser"):
            pytest.skip("running as root with no unprivileged user to start PostgreSQL as")
        as_user = ["runuser", "-u", user, "--"]
    base = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
    data = base / "data"
    if as_user:
        shutil.chown(base, user=as_user[2])
    port = _free_port()
    run = lambda *a: subprocess.run([*as_user, *a], check=True, capture_output=True, text=True, timeout=120)
    try:
        run(initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        run(pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "start", "-o",
            f"-p {port} -k {base} -h 127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        log = base / "log"
        said = (log.read_text(errors="replace") if log.exists() else "") or getattr(e, "stderr", "") or ""
        last = said.strip().splitlines()[-1] if said.strip() else str(e)
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"PostgreSQL server could not start ({Path(e.cmd[len(as_user)]).name}): {last}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _uid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


@pytest.fixture
def pg_db(pg_server) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.replace("+psycopg", "") + "/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return f"{pg_server}/{name}"
