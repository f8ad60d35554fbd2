"""A tiny OpenAI-compatible HTTP server on localhost that answers from a script.

It lets tests reach a real provider path (litellm -> the OpenAI SDK -> HTTP) offline and
trigger provider-level failures on demand: each POST to /v1/chat/completions takes the next
scripted (status, reply) and the server records every request body it received.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer(ThreadingHTTPServer):
    def __init__(self, script: list[tuple[int, str]]):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.requests.append(body)
        status, text = self.server.script.pop(0) if self.server.script else (500, "script ended")
        if status == 200:
            payload = {
                "id": f"chatcmpl-{len(self.server.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
            }
        else:
            payload = {"error": {"message": text, "type": "scripted", "code": status}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet in test output
        pass


@contextmanager
def scripted_server(script: list[tuple[int, str]]) -> Iterator[ScriptedServer]:
    """A running server answering `script` in order ((200, reply) or (status, error))."""
    server = ScriptedServer(script)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
