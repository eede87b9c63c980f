#!/usr/bin/env python3
"""Issue 47 figure: a native run holds the store; N silent connections (default 1,000)
to its lending socket; then `irqlab list` and a second run, timed.
Usage: scripts/bench-share-idle.py [N]."""
import socket, subprocess, sys, tempfile, time
from pathlib import Path
from irqlab.store import share
db = Path(tempfile.mkdtemp()) / "i.duckdb"
for p in db.parent.glob("i.duckdb*"):
    if p.is_file(): p.unlink()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
cli = [sys.executable, "-m", "irqlab.cli.main"]
run = subprocess.Popen(cli + ["run", "--target", "native", "--duration", "20s", "--window", "1s",
                              "--name", "held", "--db", str(db)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
while not (db.exists() and share.connect(db, 1.0)):
    time.sleep(0.2)
silent = []
t = time.monotonic()
while len(silent) < N:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.setblocking(False)
    try:
        s.connect(share.socket_address(db)); silent.append(s)
    except BlockingIOError:
        s.close(); time.sleep(0.001)
print(f"{N} silent connections made in {time.monotonic()-t:.2f} s")
t = time.monotonic()
ls = subprocess.run(cli + ["list", "--db", str(db)], capture_output=True, text=True)
print(f"list: exit {ls.returncode} in {time.monotonic()-t:.2f} s", ls.stderr.strip()[-200:])
t = time.monotonic()
second = subprocess.Popen(cli + ["run", "--target", "native", "--duration", "2s", "--window", "1s",
                                 "--name", "second", "--db", str(db)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
while True:
    ls = subprocess.run(cli + ["list", "--json", "--db", str(db)], capture_output=True, text=True)
    if '"second"' in ls.stdout: break
    if second.poll() is not None: break
print(f"second run listed (its row stored through the socket) {time.monotonic()-t:.2f} s after start")
_, err = second.communicate(timeout=120)
print(f"second run exit {second.returncode} {err.strip()[-300:]}")
for s in silent: s.close()
_, err = run.communicate(timeout=120)
print("holder exit", run.returncode, err.strip().splitlines()[-2:])
