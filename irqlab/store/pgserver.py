"""A throw-away PostgreSQL server (tests, `irqlab bench push`): Debian's binaries, initdb
+ pg_ctl in a temporary directory, listening only on a Unix socket there, run as an
unprivileged user (PostgreSQL refuses root), stopped and removed afterwards."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from irqlab.store.pg import pg_bindir


class PgServer:
    """initdb + pg_ctl start; ``url`` reaches it; ``stop()`` stops and removes it."""

    def __init__(self) -> None:
        bindir = pg_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries: apt-get install postgresql "
                               "(./setup.sh does)")
        self.dir = Path(tempfile.mkdtemp(prefix="irqlab-pg-"))
        self.data = self.dir / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:
            # PostgreSQL will not run as root: nobody owns the directory and the server.
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self._as = ["runuser", "-u", "nobody", "--"]
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
