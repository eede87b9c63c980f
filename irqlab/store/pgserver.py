"""A throw-away PostgreSQL server (tests, `irqlab bench push`): Debian's binaries, initdb
+ pg_ctl in a temporary directory, listening only on a Unix socket there, run as an
unprivileged user (PostgreSQL refuses root), stopped and removed afterwards.

pg_ctl's server outlives a test process killed before its teardown (SIGKILL, a timeout):
each server's directory names its owner (``owner``: pid and start time), and the next
PgServer stops and removes the servers whose owner is gone, as the restore journal undoes
a killed run's host settings at the next start."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from irqlab.journal import proc_starttime
from irqlab.store.pg import pg_bindir

_PREFIX = "irqlab-pg-"


def _owner_alive(directory: Path) -> bool:
    """True when the process that made ``directory``'s server still runs (or the owner
    file is unreadable: a server being made right now has none yet)."""
    try:
        pid_text, start_text = (directory / "owner").read_text().split()
    except (OSError, ValueError):
        return True
    return proc_starttime(int(pid_text)) == int(start_text)


def sweep_orphans(bindir: Path, as_user: list[str]) -> list[Path]:
    """Stop and remove the servers whose owner process is gone; the directories swept."""
    swept = []
    for directory in Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        if not directory.is_dir() or _owner_alive(directory):
            continue
        if (directory / "data" / "postmaster.pid").exists():
            subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(directory / "data"),
                                      "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
        swept.append(directory)
    return swept


class PgServer:
    """initdb + pg_ctl start; ``url`` reaches it; ``stop()`` stops and removes it."""

    def __init__(self) -> None:
        bindir = pg_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries: apt-get install postgresql "
                               "(./setup.sh does)")
        self._as: list[str] = []
        if os.geteuid() == 0:
            # PostgreSQL will not run as root: nobody owns the directory and the server.
            self._as = ["runuser", "-u", "nobody", "--"]
        sweep_orphans(bindir, self._as)
        self.dir = Path(tempfile.mkdtemp(prefix=_PREFIX))
        self.data = self.dir / "data"
        (self.dir / "owner").write_text(f"{os.getpid()} {proc_starttime(os.getpid())}\n")
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        self._run([str(bindir / "initdb"), "-D", str(self.data), "-U", "irqlab",
                   "--auth=trust", "-E", "UTF8", "--no-sync"])
        self._run([str(bindir / "pg_ctl"), "-D", str(self.data), "-w", "-l",
                   str(self.dir / "log"), "-o",
                   f"-k {self.dir} -c listen_addresses='' -c fsync=off", "start"])
        self._bindir = bindir
        self.url = f"postgresql://irqlab@/postgres?host={self.dir}"

    def _run(self, argv: list[str]) -> None:
        res = subprocess.run(self._as + argv, capture_output=True, text=True, timeout=120)
        if res.returncode:
            raise RuntimeError(f"{argv[0]} failed: {res.stderr.strip()[-500:]}")

    def database(self, name: str) -> str:
        """A fresh database on this server; its URL."""
        self._run([str(self._bindir / "createdb"), "-h", str(self.dir), "-U", "irqlab", name])
        return f"postgresql://irqlab@/{name}?host={self.dir}"

    def stop(self) -> None:
        try:
            self._run([str(self._bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                       "-w", "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
