"""Export carries winners of an earlier source onto today's space, and says so per entry."""
from __future__ import annotations

import json

import pytest
from test_regressions import _one_winner

from tuner.pack import ExportError, export_pack, verify_pack
from tuner.store import Winner, open_store


def test_a_winner_of_an_earlier_source_is_carried_without_the_knobs_the_space_dropped(tmp_path):
    db = str(tmp_path / "r.db")
    made = _one_winner(db)
    store = open_store(db)
    with store.session() as s:
        w = s.query(Winner).one()
        w.source_hash = "an-older-source"
        w.config = {**w.config, "A_DELETED_KNOB": 3}
        s.commit()
    out = export_pack(store, tmp_path / "pack")
    (entry,) = json.loads((out / "moe_routing.json").read_text())["entries"]
    assert entry["config"] == made["winner"] and entry["obtained"] == "carried"
    assert verify_pack(out).problems == []
    # a value today's space does not hold: left out and named, never served as something else
    with store.session() as s:
        w = s.query(Winner).one()
        w.config = {**made["winner"], "num_warps": 3}
        s.commit()
    with pytest.raises(ExportError, match="outside today's search space"):
        export_pack(store, tmp_path / "pack2")
