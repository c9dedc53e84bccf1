"""`tune dashboard --serve`: the same page over HTTP on 127.0.0.1, re-read from the store per request."""
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


def make_server(store: Store, port: int = 8765, *, pack: Path | None = None, threshold: float = 0.05,
                refresh_s: int = 60) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1:``port`` (0 picks a free port) rendering the page per request."""
    lock = threading.Lock()  # one render at a time: SQLite readers are cheap, renders are not free

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
                with lock:
                    page = build_report(store, pack=pack, threshold=threshold, refresh_s=refresh_s)
            except Exception as e:  # noqa: BLE001 - a broken read answers 500, the server stays up
                log.exception("rendering the dashboard failed")
                self._send(500, f"cannot render the dashboard: {type(e).__name__}\n".encode(), "text/plain; charset=utf-8")
                return
            self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")

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

    return ThreadingHTTPServer((HOST, port), Handler)


def serve(store: Store, port: int = 8765, **kw: Any) -> None:
    """Serve until interrupted."""
    httpd = make_server(store, port, **kw)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
