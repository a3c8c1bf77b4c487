"""What the security experiments probe with: a loopback service that logs what it is asked for, and the rule that
no probe ever leaves the machine. The "allowed" host of an allow-list is ``localhost``; the "forbidden" one is
127.0.0.1 (both loopback, both served by our own probe server)."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from urllib.parse import urlsplit

API_KEY = "field-notes-probe-key"
ALLOWED_DOMAIN = "localhost"  # resolves to loopback everywhere, so the allow-list case never leaves the machine


def assert_loopback(url: str) -> None:
    """Refuse any target that is not on this machine."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"refusing non-loopback target {url!r}: security probes stay on 127.0.0.1")


class InternalService:
    """A loopback HTTP server that logs every request; /redirect answers 302 to /secret."""

    def __init__(self):
        self.hits: list[str] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                service.hits.append(self.path)
                if self.path.startswith("/redirect"):
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.1:{service.port}/secret")
                    self.end_headers()
                    return
                body = b"internal data, not an image"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
