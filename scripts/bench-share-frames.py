#!/usr/bin/env python3
"""Issue 47 figure: a holder's RSS growth while 64 connections each send 8 MiB frames
(not JSON) to its lending socket. Usage: scripts/bench-share-frames.py [DB]."""
import socket, struct, subprocess, sys, tempfile, time, threading
from pathlib import Path
from irqlab.store import share
db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "f.duckdb"
for p in db.parent.glob(db.name + "*"):
    if p.is_file(): p.unlink()
holder = subprocess.Popen([sys.executable, "-c", f"""
import sys
from irqlab.store import Store
from irqlab.store.interface import NewRun
s = Store({str(db)!r}); s.create_run(NewRun('first', 'native', {{}}, {{}}))
print('ready', flush=True); sys.stdin.readline(); s.close(); print('closed', flush=True)
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "ready"
def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
base = rss(holder.pid); peak = [base]; stop = threading.Event()
def watch():
    while not stop.wait(0.05): peak[0] = max(peak[0], rss(holder.pid))
threading.Thread(target=watch, daemon=True).start()
body = b"x" * share.MAX_FRAME_BYTES
def send():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(share.socket_address(db))
    s.recv(4096)
    try:
        for _ in range(3): s.sendall(struct.pack("<I", len(body)) + body)
    except OSError: pass
    s.close()
t = time.monotonic()
ths = [threading.Thread(target=send) for _ in range(64)]
[x.start() for x in ths]; [x.join() for x in ths]
time.sleep(1.0); stop.set()
print(f"holder RSS base {base} MiB, peak {peak[0]} MiB, +{peak[0]-base} MiB; {time.monotonic()-t:.1f} s")
out, err = holder.communicate("\n", timeout=60)
print(out.strip().splitlines()[-1], holder.returncode, err.strip().splitlines()[-3:])
