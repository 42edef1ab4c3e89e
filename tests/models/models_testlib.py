"""Helpers for the app.models tests: a local Hub speaking huggingface_hub's protocol, and GGUF writers."""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_test_token"


# --- a local Hugging Face Hub ----------------------------------------------------------------------------------


@dataclass
class HubFile:
    data: bytes
    sha256: str
    lfs: bool = True
    served: bytes | None = None  # bytes actually sent, if they must differ from `data` (corruption tests)


@dataclass
class FakeHub:
    """State of the local Hub: repos, request log, and one-shot faults."""

    base: str = ""
    cdn: str = ""
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    drop_after: dict[str, int] = field(default_factory=dict)  # filename -> close the next GET after N bytes
    chunk_delay: float = 0.0  # seconds between 64 KiB chunks, to make transfers slow enough to cancel

    def add(self, repo: str, filename: str, data: bytes, *, lfs: bool = True, served: bytes | None = None) -> HubFile:
        f = HubFile(data, hashlib.sha256(data).hexdigest(), lfs, served)
        self.repos.setdefault(repo, {})[filename] = f
        return f

    def blob(self, sha: str) -> tuple[str, HubFile] | None:
        for files in self.repos.values():
            for name, f in files.items():
                if f.sha256 == sha:
                    return name, f
        return None

    def gets(self, suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "GET" and r["path"].endswith(suffix)]


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.0"  # one request per connection: a dropped transfer really closes the socket

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, {"Content-Type": "application/json"}, json.dumps(obj).encode())

    def _error(self, status: int, code: str, message: str) -> None:
        self._send(
            status,
            {
                "X-Error-Code": code,
                "X-Error-Message": message,
                "X-Repo-Commit": COMMIT,
                "Content-Type": "application/json",
            },
            json.dumps({"error": message}).encode(),
        )

    def _authorized(self, repo: str) -> bool:
        return repo not in self.hub.gated or self.headers.get("authorization") == f"Bearer {TOKEN}"

    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _route(self) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        self.hub.requests.append(
            {
                "method": self.command,
                "path": path,
                "range": self.headers.get("Range"),
                "authorization": self.headers.get("authorization"),
            }
        )
        if path == "/api/models":
            return self._search(parse_qs(url.query))
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
        if m:
            return self._model_info(m[1])
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self._resolve(m[1], m[3])
        m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
        if m:
            return self._blob(m[1])
        self._send(404, {}, b"not found")

    def _search(self, query: dict[str, list[str]]) -> None:
        term = (query.get("search") or [""])[0].lower()
        hits = [
            {"id": r, "downloads": 10 * len(files), "likes": 1, "tags": ["gguf"], "gated": r in self.hub.gated}
            for r, files in self.hub.repos.items()
            if term in r.lower()
        ]
        self._json(hits)

    def _model_info(self, repo: str) -> None:
        if repo not in self.hub.repos:
            return self._error(404, "RepoNotFound", "Repository not found")
        if not self._authorized(repo):
            return self._error(401, "GatedRepo", "Access to this repo is restricted")
        siblings = []
        for name, f in self.hub.repos[repo].items():
            s: dict[str, Any] = {"rfilename": name, "size": len(f.data), "blobId": _git_blob_id(f.data)}
            if f.lfs:
                s["lfs"] = {"size": len(f.data), "sha256": f.sha256, "pointerSize": 134}
            siblings.append(s)
        self._json(
            {
                "id": repo,
                "sha": COMMIT,
                "private": False,
                "gated": repo in self.hub.gated,
                "tags": ["gguf"],
                "siblings": siblings,
            }
        )

    def _resolve(self, repo: str, filename: str) -> None:
        files = self.hub.repos.get(repo)
        if files is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        if not self._authorized(repo):
            return self._error(401, "GatedRepo", "Access to this repo is restricted")
        f = files.get(filename)
        if f is None:
            return self._error(404, "EntryNotFound", "Entry not found")
        if f.lfs:
            # Like the real Hub: LFS files redirect to a CDN host, the metadata rides on the redirect itself.
            self._send(
                302,
                {
                    "Location": f"{self.hub.cdn}/cdn/{f.sha256}",
                    "X-Repo-Commit": COMMIT,
                    "X-Linked-Etag": f'"{f.sha256}"',
                    "X-Linked-Size": str(len(f.data)),
                    "ETag": f'"{_git_blob_id(f.data)}"',
                    "Content-Length": "0",
                },
            )
            return
        self._serve_bytes(filename, f, {"X-Repo-Commit": COMMIT, "ETag": f'"{_git_blob_id(f.data)}"'})

    def _blob(self, sha: str) -> None:
        found = self.hub.blob(sha)
        if found is None:
            return self._send(404, {}, b"no such blob")
        name, f = found
        self._serve_bytes(name, f, {"ETag": f'"{sha}"'})

    def _serve_bytes(self, name: str, f: HubFile, headers: dict[str, str]) -> None:
        data = f.served if f.served is not None else f.data
        start = 0
        rng = self.headers.get("Range")
        status = 200
        if rng:
            m = re.match(r"bytes=(\d+)-$", rng)
            if not m or int(m[1]) > len(data):
                return self._send(416, {"Content-Range": f"bytes */{len(data)}"})
            start, status = int(m[1]), 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        headers.update(
            {
                "Accept-Ranges": "bytes",
                "Content-Length": str(len(data) - start),
                "Content-Type": "application/octet-stream",
            }
        )
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        limit = self.hub.drop_after.pop(name, None) if self.command == "GET" else None
        pos = start
        try:
            while pos < len(data):
                end = min(len(data), pos + 65536)
                if limit is not None and end - start > limit:
                    end = start + limit
                    self.wfile.write(data[pos:end])
                    self.wfile.flush()
                    self.close_connection = True
                    return  # drop the connection mid-transfer
                self.wfile.write(data[pos:end])
                pos = end
                if self.hub.chunk_delay:
                    time.sleep(self.hub.chunk_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client cancelled


# --- GGUF files ---------------------------------------------------------------------------------------------------


@contextmanager
def serve_fake_hub() -> Iterator[FakeHub]:
    """A FakeHub served on 127.0.0.1 (its LFS redirects go to 'localhost': another host, like a CDN), stopped after."""
    state = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"hub": state}))
    server.daemon_threads = True
    port = server.server_address[1]
    state.base, state.cdn = f"http://127.0.0.1:{port}", f"http://localhost:{port}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def write_gguf(
    path: Path,
    *,
    file_type: int | None,
    tensor_types: dict[str, int],
    context_length: int = 2048,
    vocab: list[str] | None = None,
) -> Path:
    """A small valid GGUF written by the `gguf` package (F32 tensors), then re-typed to raw ids in place.

    Patching after writing is how we get fork/unknown type ids into a file: GGUFWriter refuses ids it doesn't know.
    """
    import numpy as np
    from gguf import GGUFReader, GGUFWriter

    w = GGUFWriter(str(path), "llama")
    w.add_name("test-model")
    w.add_context_length(context_length)
    if file_type is not None:
        w.add_file_type(file_type)
    w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    w.add_tokenizer_model("gpt2")
    tokens = vocab or [f"tok{i}" for i in range(64)]
    w.add_token_list(tokens)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for i, name in enumerate(tensor_types):
        w.add_tensor(name, np.full((4, 32), float(i), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = GGUFReader(str(path))
    positions = {}
    for t in reader.tensors:
        # tensor info layout: u64 name length, name, u32 n_dims, u64 dims[n], u32 type, u64 offset
        positions[t.name] = t.field.offset + 8 + len(t.name.encode()) + 4 + 8 * len(t.shape)
    del reader
    with open(path, "r+b") as f:
        for name, type_id in tensor_types.items():
            f.seek(positions[name])
            f.write(struct.pack("<I", type_id))
    return path
