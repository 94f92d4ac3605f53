"""A trivial stand-in for a testbed service: answers 200 to every GET on HOST:PORT."""

import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    host, _, port = sys.argv[1].rpartition(":")
    HTTPServer((host, int(port)), Ok).serve_forever()
