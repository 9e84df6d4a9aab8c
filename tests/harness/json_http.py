"""Small HTTP endpoints for tests: a handler base that answers JSON and logs nothing."""

from __future__ import annotations

import http.server


class JsonAnswers(http.server.BaseHTTPRequestHandler):
    """Subclasses define do_POST/do_GET and answer with ``answer``."""

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass
