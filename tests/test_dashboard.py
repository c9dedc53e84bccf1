"""The HTML report and the local server, on synthetic histories (no browser: see test_browser.py)."""
from __future__ import annotations

import re
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tuner.cli.main import main
from tuner.dashboard.report import anchor, build_report, fallback
from tuner.store import open_store

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthetic_history  # noqa: E402


@pytest.fixture
def planted(tmp_path) -> tuple[str, dict]:
    db = str(tmp_path / "history.db")
    return db, synthetic_history.build(open_store(db), evil=True)


def _chartbox(page: str, kernel: str, wkey: str) -> str:
    m = re.search(rf'<div class="chartbox[^"]*" id="{anchor(kernel, wkey, synthetic_history.GPU)}"[^>]*>', page)
    assert m, (kernel, wkey)
    return m.group(0)


def test_report_is_self_contained_shows_each_kernel_and_flags_the_planted_regression(planted):
    db, facts = planted
    page = build_report(open_store(db))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing loaded from anywhere
    assert "<script" not in page.replace("&lt;script", "")  # no script at all, so none injected
    for k in ("mhc", "moe_routing"):
        assert f'data-kernel="{k}"' in page
    assert 'data-regression="true"' in _chartbox(page, *facts["regression"])
    assert 'data-regression="false"' in _chartbox(page, *facts["outlier"])  # a single outlier is not flagged
    assert 'data-regression="false"' in _chartbox(page, *facts["improvement"])
    assert page.count('class="chartbox flagged"') == 1
    assert 'id="regression-count"><div class="n">1</div>' in page
    assert "triton 3.4.0 -&gt; 3.5.0" in page  # the step is attributed to the upgrade
    from tuner import registry
    from tuner.spec import workload_dict

    grid = [workload_dict(w) for w in registry.get("moe_routing").workloads]
    tuned = [{"tokens": int(k.split(",")[0].split("=")[1]), "profile": "dsv3"} for n, k in facts["workloads"]
             if n == "moe_routing"]
    exact = sum(fallback(w, tuned)[0] == "exact" for w in grid)
    assert f"Coverage of the default grid: <b>{exact} of {len(grid)}</b>" in page
    assert 'class="badge b-stale"' in page  # the newest revalidation's verdict in the entries table


def test_every_database_string_is_escaped(planted):
    db, _ = planted
    page = build_report(open_store(db))
    evil_k, evil_p = synthetic_history.EVIL_KERNEL, synthetic_history.EVIL_PROFILE
    assert evil_k not in page and evil_p not in page
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&quot;kernel&quot;)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert f'data-kernel="{evil_k}"' not in page  # attributes too
    # ids derived from database strings are opaque hashes
    assert all(re.fullmatch(r"a[0-9a-f]{12}", i) for i in re.findall(r'\bid="([^"]+)"', page)
               if i not in ("hatch", "regression-count"))


def test_fallback_matches_the_runtime_loader_rules():
    tuned = [{"tokens": 64, "profile": "dsv3"}, {"tokens": 4096, "profile": "dsv3"}]
    assert fallback({"tokens": 64, "profile": "dsv3"}, tuned) == ("exact", tuned[0])
    assert fallback({"tokens": 100, "profile": "dsv3"}, tuned) == ("nearest", tuned[0])
    assert fallback({"tokens": 2048, "profile": "dsv3"}, tuned) == ("nearest", tuned[1])
    assert fallback({"tokens": 64, "profile": "dsv4-flash"}, tuned) == ("default", None)


def test_empty_database_renders(tmp_path):
    db = str(tmp_path / "empty.db")
    page = build_report(open_store(db))
    assert "holds no results yet" in page


def test_dashboard_command_writes_the_file_and_takes_a_pack(planted, tmp_path, capsys):
    db, facts = planted
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()  # (a missing folder is refused: tests/test_cli_input.py)
    assert main(["dashboard", "--db", db, "--out", str(out)]) == 0
    assert out.is_file() and 'data-regression="true"' in out.read_text()
    assert main(["export", "--out", str(tmp_path / "pack"), "--db", db, "--name", "h200-nightly"]) == 0
    assert main(["dashboard", "--db", db, "--out", str(out), "--pack", str(tmp_path / "pack")]) == 0
    page = out.read_text()
    assert "entries from pack h200-nightly" in page and "Entries (pack h200-nightly)" in page
    # the pack's entries (JSON with sorted axes) land on the database's shapes: the same coverage
    # line as from the database (not each shape twice, once "off the grid")
    db_page = build_report(open_store(db))
    cov = re.findall(r"Coverage of the default grid: <b>[^<]*</b>[^<]*", page)
    assert cov and cov == re.findall(r"Coverage of the default grid: <b>[^<]*</b>[^<]*", db_page)
    capsys.readouterr()
    for args, needle in ((["--serve", "--out", str(out)], "not both"), (["--threshold", "x"], "bad value"),
                         (["--pack", str(tmp_path / "nope")], "no manifest.json"), (["--port", "70000"], "not a port"),
                         (["--serve", "--refresh", "-3"], "--refresh: -3 seconds")):
        assert main(["dashboard", "--db", db, *args]) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and len(err.splitlines()) == 1
    assert main(["dashboard", "--db", str(tmp_path / "absent.db"), "--out", str(out)]) == 2


def test_server_binds_loopback_and_rereads_the_database_per_request(planted):
    from tuner.dashboard.server import make_server
    from tuner.store import Environment

    db, _ = planted
    store = open_store(db)
    httpd = make_server(store, 0, refresh_s=30)
    assert httpd.server_address[0] == "127.0.0.1"
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/") as r:
            first = r.read().decode()
            assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
            assert r.headers["Cache-Control"] == "no-store"
        assert 'http-equiv="refresh" content="30"' in first and 'data-kernel="moe_routing"' in first
        with store.session() as s:  # a new result lands while the server runs
            s.add(Environment(fingerprint_hash="b200", gpu="NVIDIA B200", cc="10.0",
                              fingerprint={"gpu": "NVIDIA B200", "triton": "3.6.0"}))
            s.commit()
        from sqlalchemy import select
        from tuner.store import Run, Trial, TrialStatus

        with store.session() as s:
            env = s.scalar(select(Environment).where(Environment.gpu == "NVIDIA B200"))
            run = Run(kind="tune", kernel="engram", environment_id=env.id, source_hash="x", settings={})
            s.add(run)
            s.flush()
            s.add(Trial(run_id=run.id, kernel="engram", workload_key="tokens=8", workload={"tokens": 8}, config={},
                        config_key="{}", phase="final", status=TrialStatus.ok, median_us=3.0, p20_us=2.9, p80_us=3.1))
            s.commit()
        with urllib.request.urlopen(base + "/") as r:
            assert 'data-kernel="engram"' in r.read().decode()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/etc/passwd")
        assert e.value.code == 404
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_chart_marks_a_change_of_timing_method():
    import datetime as dt
    from dataclasses import replace

    from tuner.dashboard.detect import detect_series
    from tuner.dashboard.history import Point, Series
    from tuner.dashboard.report import history_chart

    v = {"torch": "2.13.0", "triton": "3.6.0", "cuda": "12.8", "driver": "575.51", "python": "3.12"}
    pts = [Point(dt.datetime(2026, 11, 29) + dt.timedelta(days=i), i + 1, "tune", 1, v, "src", "", {"ROWS": 32},
                 m, m * 0.98, m * 1.02, None, None, True) for i, m in enumerate([3.21, 4.09, 4.01, 4.02, 3.99])]
    pts[0] = replace(pts[0], timing=1)
    s = Series("engram", "tokens=256", {"tokens": 256}, "NVIDIA H200", pts)
    changes = detect_series(s)
    svg = history_chart(s, changes, {})
    assert changes == [] and "from here: timing method 1 -&gt; 2<" in svg and 'class="step' not in svg


def test_badges_tell_unconfirmed_improvements_from_unconfirmed_regressions():
    from tuner.dashboard.report import _badge

    assert 'class="badge b-unconfirmed"' in _badge("unconfirmed regression")
    assert 'class="badge b-unconfirmed-improvement"' in _badge("unconfirmed improvement")
    assert 'class="badge b-resolved"' in _badge("resolved regression")
