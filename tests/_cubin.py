"""What a compiled kernel's cubin uses, read with the cuobjdump Triton ships (the sm_90
lowering checks' scripts import it: ``from tests._cubin import usage``)."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def usage(cubin: bytes, stl: bool = False) -> dict[str, int] | None:
    """``reg``, ``stack``, ``shared`` and ``local`` bytes of the cubin's kernel (None without
    cuobjdump); with ``stl`` also ``stl``, its local-memory stores (spills). An STL needs local
    memory: with no stack and no local bytes there is none to count, and the disassembly (the
    slow part) is skipped."""
    if not os.path.exists(CUOBJDUMP):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([CUOBJDUMP, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
        got = dict(reg=int(m[1]), stack=int(m[2]), shared=int(m[3]), local=int(m[4]))
        if stl:
            sass = (subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True).stdout
                    if got["stack"] or got["local"] else "")
            got["stl"] = len(re.findall(r"\bSTL", sass))
    return got
