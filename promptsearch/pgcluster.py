"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` in a temporary folder, a Unix
socket there and no TCP port, password authentication; stopped and removed when the ``with`` block
ends. The installed server binaries are used (Debian: /usr/lib/postgresql/N/bin); they refuse to run
as root, so as root they run as the ``postgres`` user."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

USER, PASSWORD = "promptsearch", "secret"


def server_bin() -> str | None:
    """The folder of the newest installed PostgreSQL server binaries, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]), reverse=True)
    path = found[0] if found else shutil.which("initdb")
    return str(Path(path).parent) if path else None


class Cluster:
    """``with Cluster() as url:`` — a running server, its URL (``postgresql://…?host=<socket folder>``)."""

    def __init__(self):
        self.bin = server_bin()
        if self.bin is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl): install the postgresql package")
        self.base = Path(tempfile.mkdtemp(prefix="promptsearch-pg-"))
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            import pwd  # here, not at the top: POSIX only, and needed as root only

            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = self.base / "data"
        self.url = f"postgresql://{USER}:{PASSWORD}@/postgres?host={self.base}"

    def pg_ctl(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self.prefix + [f"{self.bin}/pg_ctl", "-D", str(self.data), *args], capture_output=True,
                              text=True, check=check, timeout=120)

    def start(self) -> None:
        self.pg_ctl("-l", str(self.base / "server.log"), "-w", "-o",
                    f"-k {self.base} -c listen_addresses='' -c max_connections=60 -c fsync=off", "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.pg_ctl("-m", "immediate", "-w", "stop", check=False)

    def __enter__(self) -> str:
        try:
            (self.base / "pw").write_text(PASSWORD + "\n")
            os.chmod(self.base / "pw", 0o644)
            subprocess.run(self.prefix + [f"{self.bin}/initdb", "-D", str(self.data), "-U", USER,
                                          f"--pwfile={self.base / 'pw'}",
                                          "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"],
                           capture_output=True, text=True, check=True, timeout=300)
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self.url

    def __exit__(self, *exc) -> None:
        self.stop()
        for _ in range(50):  # the server's files may still be closing
            try:
                shutil.rmtree(self.base)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
