"""The regression dashboard as one self-contained HTML page: inline CSS and SVG, no script.

Per kernel: the tuned grid as heat maps (speedup vs the default, % of the roofline floor)
with the shapes that fall back (nearest tuned neighbour or default) shown as such,
coverage counts, history charts per workload across runs and software versions with
detected steps marked, and a table of the pack's (or the database's) entries. The page
loads nothing (a Content-Security-Policy forbids it) and every string that comes from the
database or a pack goes through ``html.escape``.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import html
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tuner.dashboard.campaign import section as campaign_section
from tuner.dashboard.detect import Change, detect
from tuner.dashboard.history import (Entry, Ratios, Series, Verdict, current_entries, latest_revalidations,
                                     load_history, versions_label)
from tuner.store import Environment, Store
from tuner.spec import canonical_workload, log2_distance
from tuner.store.db import redact_url

log = logging.getLogger(__name__)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
PALETTE = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#2ca02c")


def esc(value: Any) -> str:
    """Escape anything for HTML text and attribute values (quotes included)."""
    return html.escape(str(value), quote=True)


def anchor(*parts: Any) -> str:
    """A safe, stable element id for database strings (which may hold anything)."""
    return "a" + hashlib.sha1("\x1f".join(map(str, parts)).encode()).hexdigest()[:12]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt_us(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _config_text(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


# -- data gathering -----------------------------------------------------------------------
@dataclass(frozen=True)
class TableEntry(Ratios):
    """One row of the entries table (from a pack, or the newest winner in the database)."""

    kernel: str
    workload: dict[str, Any]
    workload_key: str
    gpu: str
    config: dict[str, Any]
    is_default: bool
    median_us: float | None
    p20_us: float | None
    p80_us: float | None
    default_us: float | None
    floor_us: float | None
    noise: float
    meaningful: bool
    source_hash: str


def _from_entry(e: Entry) -> TableEntry:
    return TableEntry(e.kernel, e.workload, e.workload_key, e.gpu, e.config, e.is_default, e.median_us, e.p20_us,
                      e.p80_us, e.default_us, e.floor_us, e.noise, e.meaningful, e.source_hash)


def _from_pack(path: Path) -> tuple[list[TableEntry], dict[str, Any]]:
    from tuner.runtime import load_pack

    pack = load_pack(path, allow_other_gpu=True, quiet=True)
    gpu = str((pack.manifest.get("fingerprint") or {}).get("gpu", ""))
    meaningful = bool(pack.manifest.get("meaningful", True))
    axes = _workload_classes()
    out = []
    for kname, table in sorted(pack.tables.items()):
        for e in table.entries:
            w = dict(e.get("workload") or {})
            if kname in axes:  # keyed as the database keys it (the pack's JSON sorts the axes)
                w = canonical_workload(axes[kname], w)
            out.append(TableEntry(kname, w, ",".join(f"{k}={v}" for k, v in w.items()), gpu, dict(e.get("config") or {}),
                                  bool(e.get("is_default")), e.get("median_us"), e.get("p20_us"), e.get("p80_us"),
                                  e.get("default_median_us"), e.get("floor_us"), float(e.get("noise") or 0.0),
                                  meaningful, str(e.get("source_hash", ""))))
    return out, pack.manifest


def _plural(n: int, one: str, many: str | None = None) -> str:
    """The label of a count: ``one`` for 1, else ``many`` (``one`` + s)."""
    return one if n == 1 else many or one + "s"


def _workload_classes() -> dict[str, type]:
    """Per known kernel its workload class; {} when the registry is unavailable."""
    try:
        from tuner import registry

        return {n: k.spec.workload for n, k in registry.kernels().items()}
    except Exception as e:  # noqa: BLE001 - the report still renders what the pack holds
        log.warning("kernel registry unavailable (%s): pack workloads keyed as stored", e)
        return {}


def _registry_info() -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str]]:
    """Per known kernel: (default grid, small grid, current source hash); {} when unavailable."""
    try:
        from tuner import registry
        from tuner.spec import workload_dict

        return {n: ([workload_dict(w) for w in k.workloads], [workload_dict(w) for w in k.small_workloads],
                    k.source_hash) for n, k in registry.kernels().items()}
    except Exception as e:  # noqa: BLE001 - the report still renders what the database holds
        log.warning("kernel registry unavailable (%s): coverage shows tuned shapes only", e)
        return {}


@dataclass
class Data:
    """Everything one report shows."""

    url: str
    generated: dt.datetime
    history: list[Series]
    changes: list[Change]
    entries: list[TableEntry]
    entries_from: str
    verdicts: list[Verdict]
    environments: list[Environment]
    grids: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str]]
    threshold: float
    pack_manifest: dict[str, Any] | None = None
    unreadable: list[str] | None = None
    """Rows of the database that do not hold what they should: left out, listed on the page."""
    campaign: Any = None
    """The newest campaign over several workers (``tuner.scaleout.CampaignView``), if any."""


def gather(store: Store, *, pack: Path | None = None, threshold: float = 0.05, min_points: int = 2,
           registry_info: bool = True) -> Data:
    """Read everything the report needs from the store (and the pack) in one go."""
    from sqlalchemy import select

    unreadable: list[str] = []
    history = load_history(store, unreadable=unreadable)
    changes = detect(history, threshold=threshold, min_points=min_points)
    manifest = None
    if pack is not None:
        entries, manifest = _from_pack(pack)
        source = f"pack {manifest.get('name', pack.name)}"
    else:
        entries = [_from_entry(e) for e in current_entries(store, unreadable)]
        source = "database"
    with store.session() as s:
        envs = list(s.scalars(select(Environment).order_by(Environment.id)))
    from tuner.scaleout import view

    try:
        campaign = view(store)
        campaign_section(campaign)  # noqa: B018 - a bad value fails here, not in the page
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # another tool's campaign row: the rest shows
        unreadable.append(f"newest campaign: {type(e).__name__}: {e}"[:300])
        campaign = None
    return Data(store.url, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), history, changes, entries, source,
                latest_revalidations(store), envs, _registry_info() if registry_info else {}, threshold, manifest,
                unreadable, campaign)


# -- coverage -------------------------------------------------------------------------------
def fallback(workload: dict[str, Any], tuned: Sequence[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """How the runtime loader would serve ``workload`` from ``tuned`` shapes: ``exact``,
    ``nearest`` (log-space over the numeric axes, categorical axes equal) or ``default``."""
    num = [a for a, v in workload.items() if _num(v)]
    best, best_d = None, math.inf
    for t in tuned:
        if any(str(t.get(a)) != str(v) for a, v in workload.items() if a not in num):
            continue
        try:
            d = log2_distance(t, workload, num)
        except (KeyError, TypeError, ValueError):
            continue
        if d < best_d:
            best, best_d = t, d
    if best is None:
        return "default", None
    return ("exact" if best_d == 0 else "nearest"), best


# -- SVG pieces ---------------------------------------------------------------------------------
def _speedup_color(s: float | None) -> str:
    if s is None:
        return "#e5e5e5"
    t = max(-1.0, min(1.0, math.log2(s)))  # 0.5x .. 2x
    if t >= 0:
        g = 0.15 + 0.85 * t
        return f"rgb({int(255 - 200 * g)},{int(255 - 80 * g)},{int(255 - 170 * g)})"
    r = -t
    return f"rgb({int(255 - 40 * r)},{int(255 - 190 * r)},{int(255 - 180 * r)})"


def _floor_color(f: float | None) -> str:
    if f is None:
        return "#e5e5e5"
    t = max(0.0, min(1.0, f))
    return f"rgb({int(240 - 200 * t)},{int(245 - 140 * t)},{int(255 - 60 * t)})"


def _axes(workloads: Sequence[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """(x axis: the numeric axis with most values, the other axes forming the rows)."""
    if not workloads:
        return None, []
    names = list(workloads[0])
    numeric = [a for a in names if all(_num(w.get(a)) for w in workloads)]
    x = max(numeric, key=lambda a: len({w.get(a) for w in workloads}), default=None)
    return x, [a for a in names if a != x]


def heatmap(title: str, workloads: list[dict[str, Any]], cells: dict[str, TableEntry], tuned: list[dict[str, Any]],
            metric: str) -> str:
    """One heat map: rows = the non-x axes, columns = the x axis; untuned cells show the fallback."""
    x_axis, row_axes = _axes(workloads)
    xs = sorted({w.get(x_axis) for w in workloads}, key=float) if x_axis else [None]

    def row_key(w: dict[str, Any]) -> str:
        return " · ".join(f"{a}={w.get(a)}" for a in row_axes) or "-"

    rows: list[str] = []
    for w in workloads:
        if row_key(w) not in rows:
            rows.append(row_key(w))
    cw, ch, left, top = 54, 22, min(330, 12 + 6.2 * max(len(r) for r in rows)), 50
    width, height = left + cw * len(xs) + 10, top + ch * len(rows) + 10
    out = [f'<svg class="heatmap" role="img" width="{width:.0f}" height="{height}" viewBox="0 0 {width:.0f} {height}">',
           f'<text x="2" y="14" class="svgtitle">{esc(title)}</text>']
    for j, xv in enumerate(xs):
        out.append(f'<text x="{left + cw * j + cw / 2:.0f}" y="{top - 6}" class="tick" text-anchor="middle">'
                   f'{esc(xv if xv is not None else "")}</text>')
    if x_axis:
        out.append(f'<text x="{left:.0f}" y="30" class="tick">{esc(x_axis)} &#8594;</text>')
    for i, r in enumerate(rows):
        out.append(f'<text x="{left - 4:.0f}" y="{top + ch * i + 15}" class="tick" text-anchor="end">{esc(r)}</text>')
    for w in workloads:
        i = rows.index(row_key(w))
        j = xs.index(w.get(x_axis)) if x_axis else 0
        key = ",".join(f"{k}={v}" for k, v in w.items())
        e = cells.get(key)
        x0, y0 = left + cw * j, top + ch * i
        if e is not None:
            val = e.speedup if metric == "speedup" else e.floor_fraction
            color = _speedup_color(val) if metric == "speedup" else _floor_color(val)
            label = ("-" if val is None else f"{val:.2f}x") if metric == "speedup" else _pct(val)
            tip = (f"{e.workload_key}\n{_fmt_us(e.median_us)} us (default {_fmt_us(e.default_us)} us, "
                   f"floor {_fmt_us(e.floor_us)} us)\n{'default config' if e.is_default else _config_text(e.config)}"
                   + ("" if e.meaningful else "\ninterpreter: time not meaningful"))
            cls = "cell tuned" if e.meaningful else "cell tuned interp"
            out.append(f'<g class="{cls}"><title>{esc(tip)}</title>'
                       f'<rect x="{x0}" y="{y0}" width="{cw - 2}" height="{ch - 2}" fill="{color}"/>'
                       f'<text x="{x0 + cw / 2 - 1:.0f}" y="{y0 + 15}" text-anchor="middle">{esc(label)}</text></g>')
        else:
            how, near = fallback(w, tuned)
            tip = f"{key}\nnot tuned: " + (f"nearest tuned shape {','.join(f'{a}={b}' for a, b in near.items())}"
                                           if near else "default config")
            fill = "url(#hatch)" if how == "nearest" else "#f4f4f4"
            out.append(f'<g class="cell {how}"><title>{esc(tip)}</title>'
                       f'<rect x="{x0}" y="{y0}" width="{cw - 2}" height="{ch - 2}" fill="{fill}" stroke="#ccc"/>'
                       f'<text x="{x0 + cw / 2 - 1:.0f}" y="{y0 + 15}" text-anchor="middle" class="muted">'
                       f'{"near" if how == "nearest" else "dflt"}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _marker(kind: str, x: float, y: float, color: str, hollow: bool) -> str:
    fill = "white" if hollow else color
    if kind == "revalidate":
        return (f'<path d="M{x:.1f},{y - 5:.1f} L{x + 5:.1f},{y:.1f} L{x:.1f},{y + 5:.1f} L{x - 5:.1f},{y:.1f} Z" '
                f'fill="{fill}" stroke="{color}" stroke-width="1.5"/>')
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{color}" stroke-width="1.5"/>'


def history_chart(series: Series, changes: list[Change], colors: dict[str, str]) -> str:
    """Median with its p20..p80 bar per run, the default's time dashed, software, template and
    timing-method changes and detected steps marked (regressions red, unconfirmed orange, improvements green)."""
    pts = series.points
    w, h, l, r, t, b = 360, 170, 52, 12, 22, 30
    vals = [v for p in pts for v in (p.p20_us, p.p80_us, p.default_us) if v]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.08 or hi * 0.05 or 1.0
    lo, hi = max(0.0, lo - pad), hi + pad
    n = len(pts)

    def X(i: int) -> float:
        return l + (w - l - r) * (i + 0.5) / n

    def Y(v: float) -> float:
        return t + (h - t - b) * (1 - (v - lo) / (hi - lo))

    out = [f'<svg class="chart" role="img" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
           f'<rect x="{l}" y="{t}" width="{w - l - r}" height="{h - t - b}" fill="#fcfcfc" stroke="#ddd"/>']
    for v in (lo + (hi - lo) * f for f in (0.1, 0.5, 0.9)):
        out.append(f'<text x="{l - 4}" y="{Y(v) + 3:.1f}" class="tick" text-anchor="end">{esc(_fmt_us(v))}</text>'
                   f'<line x1="{l}" x2="{w - r}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#eee"/>')
    out.append('<text x="4" y="14" class="tick">us</text>')
    out.append(f'<text x="{l}" y="{h - 8}" class="tick">{esc(pts[0].when.date())}</text>'
               f'<text x="{w - r}" y="{h - 8}" class="tick" text-anchor="end">{esc(pts[-1].when.date())}</text>')
    for i in range(1, n):  # software or template changes between runs
        a, c = pts[i - 1], pts[i]
        if a.versions != c.versions or a.source_hash != c.source_hash or a.timing != c.timing:
            xm = (X(i - 1) + X(i)) / 2
            parts = [versions_label({k: v for k, v in c.versions.items() if a.versions.get(k) != v}),
                     "template changed" if a.source_hash != c.source_hash else "",
                     # no step is tested across this one (tuner.dashboard.detect)
                     f"timing method {a.timing} -> {c.timing}" if a.timing != c.timing else ""]
            what = "; ".join(p for p in parts if p)
            out.append(f'<g class="swchange"><title>{esc("from here: " + what)}</title>'
                       f'<line x1="{xm:.1f}" x2="{xm:.1f}" y1="{t}" y2="{h - b}" stroke="#999" stroke-dasharray="2,3"/></g>')
    dpts = [(i, p.default_us) for i, p in enumerate(pts) if p.default_us]
    if len(dpts) > 1:
        out.append('<polyline class="default" fill="none" stroke="#aaa" stroke-dasharray="5,3" points="'
                   + " ".join(f"{X(i):.1f},{Y(v):.1f}" for i, v in dpts) + '"><title>default config</title></polyline>')
    elif dpts:
        i, v = dpts[0]
        out.append(f'<line x1="{X(i) - 8:.1f}" x2="{X(i) + 8:.1f}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#aaa" '
                   f'stroke-dasharray="3,2"><title>default config</title></line>')
    out.append('<polyline fill="none" stroke="#555" stroke-width="1" points="'
               + " ".join(f"{X(i):.1f},{Y(p.median_us):.1f}" for i, p in enumerate(pts)) + '"/>')
    for c in changes:
        xm = (X(c.index - 1) + X(c.index)) / 2 if c.index > 0 else X(0)
        color = ("#d62728" if c.confirmed and not c.resolved else "#ff7f0e" if not c.confirmed else "#c9a0a0") \
            if c.is_regression else "#2ca02c"
        cls = ("regression" if c.confirmed and not c.resolved else "unconfirmed" if not c.confirmed else "resolved") \
            if c.is_regression else "improvement"
        tip = (f"{c.kind} {100 * c.change:+.1f}% ({_fmt_us(c.before_us)} -> {_fmt_us(c.after_us)} us, "
               f"p={c.p_value:.1e}, band +-{100 * c.band:.1f}%): {c.cause}")
        dash = "" if c.confirmed else ' stroke-dasharray="4,3"'
        y_lvl = Y(c.after_us)
        x_end = X(min(n - 1, c.index + c.points_after - 1)) + 6
        out.append(f'<g class="step {cls}"><title>{esc(tip)}</title>'
                   f'<line x1="{xm:.1f}" x2="{xm:.1f}" y1="{t}" y2="{h - b}" stroke="{color}" stroke-width="2"'
                   f'{dash}/>'
                   f'<line x1="{xm:.1f}" x2="{x_end:.1f}" y1="{y_lvl:.1f}" y2="{y_lvl:.1f}" stroke="{color}" '
                   f'stroke-opacity="0.5" stroke-width="3"/>'
                   f'<text x="{min(xm + 3, w - r - 40):.1f}" y="{t + 11}" fill="{color}" class="steplabel">'
                   f'{esc(f"{100 * c.change:+.0f}%")}</text></g>')
    for i, p in enumerate(pts):
        color = colors.get(versions_label(p.versions), "#333") if p.meaningful else "#999"
        tip = (f"{p.when:%Y-%m-%d %H:%M} run {p.run_id} ({p.kind})\n{_fmt_us(p.median_us)} us "
               f"[p20 {_fmt_us(p.p20_us)}, p80 {_fmt_us(p.p80_us)}]; default {_fmt_us(p.default_us)} us\n"
               f"{versions_label(p.versions)}; source {p.source_hash}"
               + (f"; commit {p.git_commit}" if p.git_commit else "") + f"\n{_config_text(p.config)}"
               + ("" if p.meaningful else "\ninterpreter: time not meaningful, not tested for regressions"))
        out.append(f'<g class="point"><title>{esc(tip)}</title>'
                   f'<line x1="{X(i):.1f}" x2="{X(i):.1f}" y1="{Y(p.p20_us):.1f}" y2="{Y(p.p80_us):.1f}" '
                   f'stroke="{color}" stroke-width="2" stroke-opacity="0.6"/>'
                   + _marker(p.kind, X(i), Y(p.median_us), color, not p.meaningful) + "</g>")
    out.append("</svg>")
    return "".join(out)


# -- page -------------------------------------------------------------------------------------
STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#20232a;color:#eee;padding:14px 24px}header h1{margin:0;font-size:20px}
header .meta{color:#aaa;font-size:12px}main{padding:8px 24px 40px}
section.kernel{background:#fff;border:1px solid #ddd;border-radius:6px;margin:18px 0;padding:8px 18px 18px}
h2{font-size:18px;margin:10px 0}h3{font-size:15px;margin:16px 0 6px;color:#444}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{border-bottom:1px solid #eee;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600;color:#fff}
.b-regression{background:#d62728}.b-unconfirmed{background:#ff7f0e}.b-improvement{background:#2ca02c}
.b-unconfirmed-improvement{background:#98c998;color:#143d14}
.b-resolved{background:#b08080}.b-stale{background:#d62728}.b-broken{background:#7b1fa2}.b-ok{background:#2ca02c}
.b-unchecked{background:#999}.summary{display:flex;gap:14px;flex-wrap:wrap;margin:14px 0}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:140px}
.card .n{font-size:24px;font-weight:700}.card.bad .n{color:#d62728}.card.good .n{color:#2ca02c}
.charts{display:flex;flex-wrap:wrap;gap:10px}.chartbox{border:1px solid #e3e3e3;border-radius:4px;padding:4px 6px;
background:#fff}.chartbox.flagged{border:2px solid #d62728}.chartbox .wl{font-size:12px;font-weight:600;
max-width:360px;overflow-wrap:anywhere}svg text{font-size:11px;fill:#333}svg .tick{font-size:10px;fill:#666}
svg .svgtitle{font-size:12px;font-weight:600}svg .muted{fill:#999;font-size:10px}svg .steplabel{font-weight:700}
.heatmaps{display:flex;flex-wrap:wrap;gap:18px;overflow-x:auto}.legend span{margin-right:12px;font-size:12px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px;vertical-align:middle}
.note{color:#666;font-size:12.5px}code{font-size:12px;overflow-wrap:anywhere}
svg .cell.interp rect{opacity:.45}
.interp{background:#fff7e0;border:1px solid #f0d890;padding:4px 10px;border-radius:4px;font-size:12.5px}
"""


def _badge(kind: str, text: str | None = None) -> str:
    cls = kind.split()[0] if kind.split()[0] in ("unconfirmed", "resolved") else kind.split()[-1]
    if kind == "unconfirmed improvement":  # pale green: not the unconfirmed regression's orange
        cls = "unconfirmed-improvement"
    return f'<span class="badge b-{esc(cls)}">{esc(text or kind)}</span>'


def render(data: Data, *, refresh_s: int | None = None) -> str:
    """The whole page as a string."""
    kernels = sorted({s.kernel for s in data.history} | {e.kernel for e in data.entries}
                     | {v.kernel for v in data.verdicts})
    labels = sorted({versions_label(p.versions) for s in data.history for p in s.points})
    colors = {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(labels)}
    by_series: dict[tuple[str, str, str], list[Change]] = {}
    for c in data.changes:
        by_series.setdefault((c.kernel, c.workload_key, c.gpu), []).append(c)
    open_regs = [c for c in data.changes if c.confirmed and c.is_regression and not c.resolved]
    unconfirmed = [c for c in data.changes if not c.confirmed and c.is_regression]
    improvements = [c for c in data.changes if c.confirmed and not c.is_regression]
    stale = [v for v in data.verdicts if v.verdict in ("stale", "broken")]
    interp_only = data.environments and all(e.gpu == "cpu-interpreter" for e in data.environments)

    h: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
                    '<meta name="viewport" content="width=device-width, initial-scale=1">',
                    '<link rel="icon" href="data:,">']
    if refresh_s:
        h.append(f'<meta http-equiv="refresh" content="{int(refresh_s)}">')
    h += ["<title>tuner regression dashboard</title>", f"<style>{STYLE}</style></head><body>",
          '<svg width="0" height="0" style="position:absolute"><defs><pattern id="hatch" width="6" height="6" '
          'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f4f4f4"/>'
          '<line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs></svg>',
          "<header><h1>tuner regression dashboard</h1>",
          f'<div class="meta">database {esc(redact_url(data.url))} · generated {esc(f"{data.generated:%Y-%m-%d %H:%M}")} UTC'
          f" · entries from {esc(data.entries_from)} · threshold {esc(f'{100 * data.threshold:g}')}%"
          + (f" · refreshes every {int(refresh_s)} s" if refresh_s else "") + "</div></header><main>"]
    if data.unreadable:
        h.append(f'<p class="interp" id="unreadable">{len(data.unreadable)} unreadable '
                 f'{"entry" if len(data.unreadable) == 1 else "entries"} in the database, left out: '
                 + "; ".join(esc(u) for u in data.unreadable[:20]) + ("; ..." if len(data.unreadable) > 20 else "")
                 + "</p>")
    if interp_only:
        h.append('<p class="interp">Every result here was measured through the Triton interpreter (no GPU): configs '
                 "are verified, times are not meaningful and are not tested for regressions.</p>")
    h.append('<div class="summary">'
             f'<div class="card {"bad" if open_regs else "good"}" id="regression-count"><div class="n">{len(open_regs)}</div>'
             f"{_plural(len(open_regs), 'regression')}</div>"
             f'<div class="card"><div class="n">{len(unconfirmed)}</div>unconfirmed (newest point only)</div>'
             f'<div class="card"><div class="n">{len(improvements)}</div>{_plural(len(improvements), "improvement")}</div>'
             f'<div class="card {"bad" if stale else ""}"><div class="n">{len(stale)}</div>stale pack '
             f'{_plural(len(stale), "entry", "entries")}</div>'
             f'<div class="card"><div class="n">{len(kernels)}</div>{_plural(len(kernels), "kernel")} · '
             f'{sum(len(s.points) for s in data.history)} measurements</div></div>')
    h.append(campaign_section(data.campaign))
    if open_regs or unconfirmed:
        h.append("<h3>Regressions</h3><table class=\"regressions\"><tr><th></th><th>kernel</th><th>workload</th><th>GPU</th>"
                 "<th>change</th><th>before -> after (us)</th><th>from</th><th>what changed</th><th>p</th></tr>")
        for c in sorted(open_regs, key=lambda c: -c.change) + unconfirmed:
            aid = anchor(c.kernel, c.workload_key, c.gpu)
            h.append(f'<tr class="{"regression" if c.confirmed else "unconfirmed"}"><td>{_badge(c.kind)}</td>'
                     f"<td>{esc(c.kernel)}</td><td><a href=\"#{aid}\">{esc(c.workload_key)}</a></td><td>{esc(c.gpu)}</td>"
                     f'<td class="num">{esc(f"{100 * c.change:+.1f}%")}</td>'
                     f'<td class="num">{esc(_fmt_us(c.before_us))} -> {esc(_fmt_us(c.after_us))}</td>'
                     f"<td>{esc(f'{c.when:%Y-%m-%d}')}</td><td>{esc(c.cause)}</td>"
                     f'<td class="num">{esc(f"{c.p_value:.0e}")}</td></tr>')
        h.append("</table>")
    if labels:
        h.append('<div class="legend"><b>software:</b> ' + "".join(
            f'<span><i class="swatch" style="background:{colors[lab]}"></i>{esc(lab or "unknown")}</span>'
            for lab in labels) + '<span>● tune run</span><span>◆ revalidation</span>'
            '<span>hollow: interpreter</span><span>dashed grey: default config</span></div>')
    h.append('<p class="note">Kernels: ' + " · ".join(
        f'<a href="#{anchor("kernel", k)}">{esc(k)}</a>' for k in kernels) + "</p>")
    for k in kernels:
        h.append(_kernel_section(data, k, by_series, colors))
    if not kernels:
        h.append('<p class="note">The database holds no results yet: run <code>tune &lt;kernel&gt;</code>.</p>')
    h.append("</main></body></html>")
    return "\n".join(h)


def _kernel_section(data: Data, kernel: str, by_series: dict, colors: dict[str, str]) -> str:
    grid_info = data.grids.get(kernel)
    entries = [e for e in data.entries if e.kernel == kernel]
    verdicts = {(v.workload_key, v.gpu): v for v in data.verdicts if v.kernel == kernel}
    series = [s for s in data.history if s.kernel == kernel]
    n_regs = sum(1 for s in series for c in by_series.get(s.key, []) if c.confirmed and c.is_regression and not c.resolved)
    out = [f'<section class="kernel" id="{anchor("kernel", kernel)}" data-kernel="{esc(kernel)}">',
           f"<h2>{esc(kernel)} " + (_badge("regression", f"{n_regs} regression{'s' if n_regs != 1 else ''}")
                                     if n_regs else "") + "</h2>"]
    # heat maps and coverage, per GPU
    gpus = sorted({e.gpu for e in entries})
    for gpu in gpus:
        ge = [e for e in entries if e.gpu == gpu]
        tuned = [e.workload for e in ge]
        grid = []
        if grid_info:
            grid = grid_info[1] if gpu == "cpu-interpreter" else grid_info[0]
        keys = {",".join(f"{a}={b}" for a, b in w.items()) for w in grid}
        shapes = list(grid) + [e.workload for e in ge if e.workload_key not in keys]
        cells = {e.workload_key: e for e in ge}
        hows = [fallback(w, tuned)[0] for w in grid]
        n_grid = len(grid)
        out.append(f"<h3>{esc(gpu)}: tuned grid</h3>")
        if n_grid:
            out.append(f'<p class="coverage note" data-gpu="{esc(gpu)}">Coverage of the default grid: '
                       f"<b>{hows.count('exact')} of {n_grid}</b> shapes tuned ({_pct(hows.count('exact') / n_grid)}); "
                       f"{hows.count('nearest')} fall back to the nearest tuned shape, {hows.count('default')} to the "
                       f"default config" + (f"; {len(shapes) - n_grid} tuned shapes off the grid" if len(shapes) > n_grid
                                            else "") + ".</p>")
        else:
            out.append(f'<p class="coverage note">{len(ge)} tuned shapes (the kernel is not in this checkout: '
                       "no default grid to compare with).</p>")
        if not all(e.meaningful for e in ge):
            out.append('<p class="interp">Interpreter times: the speedups below are not GPU results.</p>')
        out.append('<div class="heatmaps">' + heatmap("speedup vs default", shapes, cells, tuned, "speedup")
                   + heatmap("% of roofline floor", shapes, cells, tuned, "floor") + "</div>")
    # history
    multi = [s for s in series if len(s.points) > 1]
    single = [s for s in series if len(s.points) <= 1]

    def rank(s: Series) -> tuple:
        cs = by_series.get(s.key, [])
        return (not any(c.confirmed and c.is_regression and not c.resolved for c in cs),
                not any(c.is_regression for c in cs), not cs)

    if series:
        out.append("<h3>History per workload</h3>")
    out.append('<div class="charts">')
    for s in sorted(multi, key=rank):
        cs = by_series.get(s.key, [])
        flagged = any(c.confirmed and c.is_regression and not c.resolved for c in cs)
        badges = " ".join(_badge(c.kind, f"{c.kind} {100 * c.change:+.0f}%") for c in cs)
        out.append(f'<div class="chartbox{" flagged" if flagged else ""}" id="{anchor(s.kernel, s.workload_key, s.gpu)}" '
                   f'data-workload="{esc(s.workload_key)}" data-regression="{"true" if flagged else "false"}">'
                   f'<div class="wl">{esc(s.workload_key)} <span class="note">{esc(s.gpu)}</span> {badges}</div>'
                   + history_chart(s, cs, colors) + "</div>")
    out.append("</div>")
    if single:
        out.append(f"<details><summary class=\"note\">{len(single)} workloads measured once (no history yet)</summary>"
                   "<p class=\"note\">" + ", ".join(f"{esc(s.workload_key)} ({esc(s.gpu)})" for s in single)
                   + "</p></details>")
    # entries table
    if entries:
        current = grid_info[2] if grid_info else None
        out.append(f"<h3>Entries ({esc(data.entries_from)})</h3><table class=\"entries\"><tr><th>workload</th><th>GPU</th>"
                   "<th>config</th><th>median us</th><th>p20-p80</th><th>default us</th><th>speedup</th><th>floor</th>"
                   "<th>noise</th><th>source</th><th>revalidation</th></tr>")
        for e in entries:
            v = verdicts.get((e.workload_key, e.gpu))
            src = esc(e.source_hash) + (" <span class=\"note\">(outdated)</span>" if current and e.source_hash
                                        and e.source_hash != current else "")
            out.append(f"<tr><td>{esc(e.workload_key)}</td><td>{esc(e.gpu)}"
                       + ("" if e.meaningful else " <span class=\"note\">(interp)</span>") + "</td>"
                       f"<td><code>{esc('default' if e.is_default else _config_text(e.config))}</code></td>"
                       f'<td class="num">{esc(_fmt_us(e.median_us))}</td>'
                       f'<td class="num">{esc(_fmt_us(e.p20_us))}-{esc(_fmt_us(e.p80_us))}</td>'
                       f'<td class="num">{esc(_fmt_us(e.default_us))}</td>'
                       f'<td class="num">{esc("-" if e.speedup is None else f"{e.speedup:.2f}x")}</td>'
                       f'<td class="num">{esc(_pct(e.floor_fraction))}</td><td class="num">{esc(_pct(e.noise))}</td>'
                       f"<td><code>{src}</code></td><td>"
                       + (f"{_badge(v.verdict)} <span class=\"note\">{esc(v.reason)}</span>" if v else "-") + "</td></tr>")
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out)


def build_report(store: Store, *, pack: Path | None = None, threshold: float = 0.05, min_points: int = 2,
                 refresh_s: int | None = None) -> str:
    """Read the store (and the pack) and render the dashboard page."""
    return render(gather(store, pack=pack, threshold=threshold, min_points=min_points), refresh_s=refresh_s)


def write_report(store: Store, out: Path, **kw: Any) -> Path:
    """Write the page to ``out`` (parents created) and return the path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(store, **kw), encoding="utf-8")
    return out


__all__ = ["build_report", "write_report", "render", "gather", "fallback", "esc", "anchor", "heatmap",
           "history_chart", "Data", "TableEntry"]
