"""The arm64 probe's console frames (docs/formats.md section 7) for given records, as the
probe writes them with sink=console and a board's xl console shows them: what a board's
saved console log holds, built from a run made here (tests of `irqlab import
irqlab-console --xentrace`)."""

from __future__ import annotations

import numpy as np

from irqlab.samples.console import frame_line


def console_log(probe: dict, recs: np.ndarray) -> bytes:
    """What the probe prints with sink=console on a board (docs/formats.md section 7),
    for these records: H, then C (its counter offset), T running, S frames, T done. The
    board's xl console prefixes each line, as Xen does."""
    ref = probe["ref_counter"]
    hz, period = probe["tick_hz"], probe["period_tick"]
    out = [frame_line("H", 0, ["1", "2", f"{hz:x}", "5", "3", f"{period:x}", "1",
                               f"{probe['inject_every']:x}",
                               f"{probe['inject_irqoff_tick']:x}", "10000", "0",
                               probe["build_id"]]),
           frame_line("C", 1, ["1", ("-" if ref["offset_tick"] < 0 else "")
                               + f"{abs(ref['offset_tick']):x}", f"{ref['error_tick']:x}"]),
           frame_line("T", 2, ["1", "0", "0", "0", ""])]
    fseq = 3
    for k in range(0, len(recs), 8):
        part = recs[k:k + 8]
        prev = int(part["deadline_tick"][0]) - period
        items = []
        for r in part:
            lat = int(r["entry_tick"]) - int(r["deadline_tick"])
            dd = int(r["deadline_tick"]) - prev
            item = ("-" if lat < 0 else "") + f"{abs(lat):x}"
            if int(r["flags"]):
                item += f":{dd:x}:{int(r['flags']):x}"
            elif dd != period:
                item += f":{dd:x}"
            items.append(item)
            prev = int(r["deadline_tick"])
        out.append(frame_line("S", fseq, [f"{int(part['seq'][0]):x}",
                                          f"{int(part['deadline_tick'][0]) - period:x}",
                                          ";".join(items)]))
        fseq += 1
    out.append(frame_line("T", fseq, ["2", "0", f"{len(recs):x}", "0", ""]))
    return b"".join(b"(d1) " + line for line in out)
