"""A small in-process streaming server (OpenAI-style SSE) whose delays and faults are known.

It runs on 127.0.0.1 in a thread with its own event loop, speaks HTTP/1.1 by hand (keep-alive,
chunked bodies) so a test can make it misbehave exactly: wait, fail, send malformed lines, drop
the connection mid-stream, omit ``[DONE]`` or ``usage``. The misbehaving modes of :class:`Plan`
(one field each): ``hang`` (no token), ``hang_headers`` (not even a status line),
``stall_after`` (silent after k tokens), ``malformed_after``, ``raw_body`` (these bytes as the
stream: the corpus in ``tests/data/bad/bench``), ``reset_after`` (a TCP reset after k tokens,
-1: before the status line), ``status`` (429, 5xx) with ``endless_body``, ``endless_line`` (one
SSE line that never ends) and ``usage_override`` (lying token counts). It records when each
request arrived and when each token event was written (``time.perf_counter``, the clock the
client uses), so tests compare the client's measurements with the truth.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Plan:
    """How the server answers one request."""

    status: int = 200
    ttft_s: float = 0.0
    itl_s: float = 0.0
    tokens: int = 4
    done: bool = True
    usage: bool = True
    malformed_after: int | None = None
    drop_after: int | None = None
    hang: bool = False
    comments: bool = False
    hang_headers: bool = False
    stall_after: int | None = None
    reset_after: int | None = None
    raw_body: bytes | None = None
    gzip_body: bytes | None = None  # sent as is with Content-Encoding: gzip
    endless_body: bool = False
    endless_line: bool = False
    usage_override: dict[str, Any] | None = None
    content_type: str = "text/event-stream"


@dataclass
class Record:
    index: int
    body: dict[str, Any]
    t_recv: float
    t_tokens: list[float] = field(default_factory=list)


class FakeServer:
    def __init__(self, plan: Callable[[int, dict[str, Any]], Plan]) -> None:
        self.plan = plan
        self.records: list[Record] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._count = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def start(self) -> FakeServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                _method, path, _ = line.decode().split(" ", 2)
                headers = {}
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    k, _, v = h.decode().partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                body = await reader.readexactly(n) if n else b""
                t_recv = time.perf_counter()
                if path == "/version":
                    self._plain(writer, 200, json.dumps({"version": "fake-1.0"}))
                elif path.endswith("/completions"):
                    keep = await self._stream(writer, json.loads(body), path, t_recv)
                    if not keep:
                        return
                else:
                    self._plain(writer, 404, json.dumps({"error": "not found"}))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        """Close with a TCP reset (RST), as a crashed server or a middlebox does."""
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    @staticmethod
    def _plain(writer: asyncio.StreamWriter, status: int, text: str) -> None:
        data = text.encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)

    async def _stream(self, writer: asyncio.StreamWriter, body: dict[str, Any], path: str,
                      t_recv: float) -> bool:
        idx = self._count
        self._count += 1
        rec = Record(idx, body, t_recv)
        self.records.append(rec)
        plan = self.plan(idx, body)
        if plan.hang_headers:
            await asyncio.sleep(3600)
        if plan.reset_after == -1:
            self._reset(writer)
            return False
        if plan.status != 200 and plan.endless_body:
            writer.write(f"HTTP/1.1 {plan.status} X\r\nContent-Type: text/plain\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n".encode())
            while True:  # ends when the client closes the connection (drain raises)
                writer.write(b"10000\r\n" + b"e" * 0x10000 + b"\r\n")
                await writer.drain()
        if plan.status != 200:
            self._plain(writer, plan.status, json.dumps({"error": "server error"}))
            return True
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {plan.content_type}\r\n".encode()
                         + (b"Content-Encoding: gzip\r\n" if plan.gzip_body is not None
                            else b"")
                         + b"Transfer-Encoding: chunked\r\n\r\n")
            await writer.drain()

            async def send(payload: str | bytes) -> None:
                data = payload if isinstance(payload, bytes) else payload.encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()

            if plan.hang:
                await asyncio.sleep(3600)
            if plan.raw_body is not None or plan.gzip_body is not None:
                body_bytes = plan.raw_body if plan.raw_body is not None else plan.gzip_body
                assert body_bytes is not None
                for at in range(0, len(body_bytes), 0x10000):
                    await send(body_bytes[at:at + 0x10000])
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return True
            if plan.endless_line:
                await send("data: {\"choices\": [{\"text\": \"")
                while True:  # ends when the client closes the connection (drain raises)
                    await send("x" * 0x10000)
            chat = path.endswith("/chat/completions")
            prompt = (body["messages"][0]["content"][0]["text"] if chat else body["prompt"])
            for k in range(plan.tokens):
                await asyncio.sleep(plan.ttft_s if k == 0 else plan.itl_s)
                if plan.drop_after is not None and k == plan.drop_after:
                    writer.transport.abort()
                    return False
                if plan.reset_after is not None and k == plan.reset_after:
                    self._reset(writer)
                    return False
                if plan.stall_after is not None and k == plan.stall_after:
                    await asyncio.sleep(3600)
                if plan.malformed_after is not None and k == plan.malformed_after:
                    await send("data: {this is not json\n\n")
                if plan.comments:
                    await send(": ping\n\n")
                choice = ({"index": 0, "delta": {"content": f" t{k}"}} if chat
                          else {"index": 0, "text": f" t{k}", "finish_reason": None})
                # stamped before the write: a client on another thread can read the event before
                # this coroutine resumes from the drain
                rec.t_tokens.append(time.perf_counter())
                await send("data: " + json.dumps({"choices": [choice]}) + "\n\n")
            if plan.usage:
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": plan.tokens,
                         "total_tokens": len(prompt.split()) + plan.tokens,
                         **(plan.usage_override or {})}
                await send("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n")
            if plan.done:
                await send("data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        finally:
            self.in_flight -= 1


