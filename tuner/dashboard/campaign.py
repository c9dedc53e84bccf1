"""The dashboard's campaign section: the newest campaign's workers and, per GPU and family,
workloads done / claimed / left (what `tune campaign --status` prints)."""
from __future__ import annotations

import html
from typing import Any


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _age(s: float) -> str:
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


def section(v: Any) -> str:
    """HTML of a ``tuner.scaleout.CampaignView`` (every string escaped); '' for None."""
    if v is None:
        return ""
    budget = "" if v.budget_left_s is None else (
        f" · budget left {v.budget_left_s / 60:.0f} min" if v.budget_left_s > 0 else " · budget spent")
    out = [f'<section id="campaign"><h3>Campaign {int(v.id)} <span class="note">({_esc(v.status)})</span></h3>',
           (f'<p class="note">started {_esc(f"{v.created:%Y-%m-%d %H:%M}")} UTC on {_esc(v.host)} · '
            f'{_esc(", ".join(v.kernels))} · {_esc(", ".join(v.states))} · {_esc(v.settings.get("n_trials"))} trials'
            f' · lease {_esc(f"{v.lease_s:g}")} s{_esc(budget)}</p>')]
    if v.workers:
        out.append('<table class="workers"><tr><th>worker</th><th>host</th><th>GPU</th><th>state</th>'
                   "<th>workload</th><th>last heartbeat</th></tr>")
        for w in v.workers:
            state = "silent (lease run out)" if w.silent else w.status
            out.append(f"<tr><td>{int(w.id)}</td><td>{_esc(w.host)}</td><td>{_esc(w.gpu)}"
                       + (f" #{_esc(w.device)}" if w.device else "") + f"</td><td>{_esc(state)}</td>"
                       f"<td>{_esc(w.workload or '-')}</td>"
                       f"<td>{_esc(_age(w.heartbeat_s)) if w.status == 'running' else '-'}</td></tr>")
        out.append("</table>")
    out.append('<table class="families"><tr><th>GPU</th><th>family</th><th>done</th><th>claimed</th><th>left</th></tr>')
    for f in v.families:
        out.append(f"<tr><td>{_esc(f.gpu)}</td><td>{_esc(f.kernel)}</td><td class=\"num\">{int(f.done)}</td>"
                   f"<td class=\"num\">{int(f.claimed)}</td><td class=\"num\">{int(f.left)}</td></tr>")
    out.append("</table></section>")
    return "\n".join(out)
