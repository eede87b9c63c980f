"""The server: the listening socket, the token rule, uvicorn.

Bound to loopback by default. Any other address exposes the store's runs (host names,
kernels, command lines) to a network, so a token is then required: generated here unless
``--token`` gives one, printed once at start in the URL to open, and checked on every
request (irqlab/serve/app.py, Guard: 401 without it).
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470


@dataclass(frozen=True)
class Bind:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_bind(text: str) -> Bind:
    """``ADDR:PORT``, ``ADDR``, ``:PORT`` or ``[v6]:PORT``; ValueError names the fix.
    Port 0 takes a free port (printed at start)."""
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    host = host or DEFAULT_HOST
    if port_text and not (port_text.isascii() and port_text.isdigit()
                          and int(port_text) <= 65535):
        raise ValueError(f"--bind {text!r}: the port must be 0-65535, e.g. "
                         f"--bind 127.0.0.1:{DEFAULT_PORT}")
    try:
        if host != "localhost":
            ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"--bind {text!r}: {host!r} is not an IP address: give one, e.g. "
                         f"--bind 0.0.0.0:{DEFAULT_PORT} (all IPv4 addresses)") from None
    return Bind(host, int(port_text) if port_text else DEFAULT_PORT)


def listen(bind: Bind) -> socket.socket:
    """The listening socket (OSError with the reason when the address cannot be used)."""
    family = socket.AF_INET6 if ":" in bind.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind.host, bind.port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def choose_token(bind: Bind, given: str | None) -> str | None:
    """The token requests must carry: ``given``, else a new one when not on loopback."""
    if given:
        return given
    return None if bind.loopback else secrets.token_urlsafe(24)


def url_of(sock: socket.socket, token: str | None) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(db: str | Path, sock: socket.socket, bind: Bind, token: str | None,
          say: Callable[[str], None]) -> None:
    """Serve on ``sock`` (from :func:`listen`) until SIGINT/SIGTERM, which uvicorn
    handles: it stops accepting, finishes the requests under way and returns."""
    import anyio
    import anyio.to_thread
    import uvicorn

    from irqlab.serve.app import LOOPBACK_HOSTS, build_app

    # Pages run in anyio's worker threads; its asyncio backend is imported on the first
    # such call (0.2 s): pay it here, not in the first visitor's request.
    anyio.run(anyio.to_thread.run_sync, lambda: None)

    # Behind a loopback bind only loopback Host headers are answered (DNS rebinding);
    # an exposed server is reached by any name, and its token guards it.
    app = build_app(db, token, LOOPBACK_HOSTS if bind.loopback else None, warm=True)
    say(f"irqlab serve: {url_of(sock, token)}")
    if token:
        say("irqlab serve: a token is required (the address is not loopback): open the "
            "URL above, or send 'Authorization: Bearer TOKEN'")
    config = uvicorn.Config(app, log_level="warning", access_log=False,
                            server_header=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
