"""`tune dashboard --serve`: the same page over HTTP on 127.0.0.1, rendered again once the store changes."""
from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tuner.dashboard.report import CSP, build_report
from tuner.store import Store

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # loopback only: the page shows what was tuned where; never bind it wider


def _state(store: Store, pack: Path | None) -> tuple:
    """What the page depends on, cheap to read per request: each table's row count and newest
    id, the newest winner update and run end, the pack files' times (a change to any of them
    renders the page again)."""
    from sqlalchemy import text

    parts = []
    with store.engine.connect() as c:
        for table in ("tuner_environments", "tuner_runs", "tuner_trials", "tuner_winners", "tuner_revalidations"):
            parts.append(tuple(c.execute(text(f"SELECT count(*), max(id) FROM {table}")).one()))
        parts.append(tuple(c.execute(text("SELECT max(updated) FROM tuner_winners")).one()))
        parts.append(tuple(c.execute(text("SELECT max(finished), count(finished) FROM tuner_runs")).one()))
        parts.append(tuple(c.execute(text("SELECT count(*), max(claimed), max(finished), count(finished) "
                                          "FROM tuner_claims")).one()))
        parts.append(tuple(c.execute(text("SELECT count(*), max(finished) FROM tuner_workers")).one()))
    if pack is not None:
        parts.append(tuple(sorted((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in Path(pack).iterdir())))
    return tuple(parts)


class _Page:
    """The rendered page, reused until the store changes; one render at a time, every other
    request waits for it and shares it (a render takes a fraction of a second: 200 requests
    rendering each would queue for a minute)."""

    def __init__(self, render, state) -> None:
        self.render, self.state = render, state
        self.lock = threading.Lock()
        self.key: tuple | None = None
        self.page: str | None = None
        self.born = 0.0

    def get(self, max_age_s: float) -> str:
        import time

        key = self.state()
        if self.page is not None and key == self.key and time.monotonic() - self.born < max_age_s:
            return self.page
        with self.lock:
            if self.page is None or key != self.key or time.monotonic() - self.born >= max_age_s:
                self.page, self.key, self.born = self.render(), key, time.monotonic()
            return self.page


def make_server(store: Store, port: int = 8765, *, pack: Path | None = None, threshold: float = 0.05,
                refresh_s: int = 60) -> ThreadingHTTPServer:
    """A threaded server bound to 127.0.0.1:``port`` (0 picks a free port); the page is rendered
    once and again after the store (or the pack) changes, and at least once a ``refresh_s``
    (its "generated" time and the registry's grids stay current)."""
    page = _Page(lambda: build_report(store, pack=pack, threshold=threshold, refresh_s=refresh_s),
                 lambda: _state(store, pack))
    max_age = float(refresh_s or 60)

    class Handler(BaseHTTPRequestHandler):
        server_version = "tuner-dashboard"

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?", 1)[0]
            if path == "/favicon.ico":
                self.send_response(204)
                self.end_headers()
                return
            if path not in ("/", "/index.html", "/report.html"):
                self._send(404, b"not found\n", "text/plain; charset=utf-8")
                return
            try:
                body = page.get(max_age)
            except Exception as e:  # noqa: BLE001 - a broken read answers 500, the server stays up
                log.exception("rendering the dashboard failed")
                # one line naming what did not read (a row that does not decode: its column's error)
                first = str(e).splitlines()[0][:200] if str(e) else ""
                why = f"cannot render the dashboard from {store.shown_url}: {type(e).__name__}: {first}\n"
                self._send(500, why.encode(), "text/plain; charset=utf-8")
                return
            self._send(200, body.encode("utf-8"), "text/html; charset=utf-8")

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, fmt: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), fmt % args)

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # listen backlog (http.server's 5 refuses a burst of clients)
        daemon_threads = True

    httpd = Server((HOST, port), Handler)
    try:
        page.get(max_age)  # the first visitors get a ready page
    except Exception:  # noqa: BLE001 - answered per request (500) until the database reads again
        log.exception("rendering the dashboard failed")
    return httpd


def serve(store: Store, port: int = 8765, **kw: Any) -> None:
    """Serve until interrupted."""
    httpd = make_server(store, port, **kw)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
