"""Records hog.irqtrace.gz and hog.samples.npz in this folder: a nested
arm64 KVM host's capture (`irqlab run --target kvm-arm64 --trace`, 200 samples at 10 ms)
with `--load kvm-host-hog:spin=5ms,every=37ms` on the vCPU thread's CPU, and the run's
samples (seq, deadline_tick, entry_tick) with its tick rate. Emulated (QEMU TCG): the
figures are the pipeline's, not hardware's.
Run from the repository root: .venv/bin/python tests/unit/explain/data/kvm-arm64/record.py
(a folder of its own: the captures directly in data/ are the switch-repair tests').
"""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT))
from irqlab.explain.run import capture_path  # noqa: E402 (path set above)
from irqlab.explain.seam import stored_samples  # noqa: E402
from irqlab.store import Store  # noqa: E402

HERE = Path(__file__).resolve().parent
with tempfile.TemporaryDirectory() as tmp:
    db = Path(tmp) / "fixture.duckdb"
    subprocess.run([sys.executable, "-m", "irqlab.cli.main", "run", "--target", "kvm-arm64",
                    "--period", "10ms", "--samples", "200", "--trace", "--load",
                    "kvm-host-hog:spin=5ms,every=37ms,start=300ms", "-q", "--name",
                    "fixture", "--db", str(db)], check=True, cwd=ROOT)
    with Store(db, read_only=True) as st:
        run = st.resolve("fixture")
        shutil.copyfile(capture_path(st, run), HERE / "hog.irqtrace.gz")
        s = stored_samples(st, run.run_id)
        np.savez_compressed(HERE / "hog.samples.npz",
                            seq=s["seq"], deadline_tick=s["deadline_tick"],
                            entry_tick=s["entry_tick"], tick_hz=np.int64(run.tick_hz),
                            threshold_ns=np.int64(run.threshold_ns))
print("wrote", HERE / "hog.irqtrace.gz", HERE / "hog.samples.npz")
