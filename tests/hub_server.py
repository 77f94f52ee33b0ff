"""A Hub-like file server on 127.0.0.1 for the real huggingface_hub download path.

It answers `/{org}/{repo}/resolve/{revision}/{filename}` the way the Hub does: the commit in
`X-Repo-Commit`, an `ETag`, and `X-Error-Code` on failures (RepoNotFound, GatedRepo,
RevisionNotFound, EntryNotFound), which huggingface_hub turns into its typed errors.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from helpers import QuietServer


@dataclass
class Repo:
    revisions: dict[str, dict[str, bytes]]  # commit sha -> files
    refs: dict[str, str] = field(default_factory=dict)  # branch/tag -> commit sha
    gated: bool = False


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""


def _handler(hub: FakeHub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _fail(self, status: int, code: str) -> None:
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve(self, with_body: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return self._fail(404, "")  # not a Hub URL: a bare 404, no Hub error code
            repo_id, rev, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._fail(404, "RepoNotFound")
            if repo.gated and "authorization" not in {k.lower() for k in self.headers}:
                return self._fail(401, "GatedRepo")
            commit = repo.refs.get(rev, rev)
            files = repo.revisions.get(commit)
            if files is None:
                return self._fail(404, "RevisionNotFound")
            if filename not in files:
                return self._fail(404, "EntryNotFound")
            body = files[filename]
            self.send_response(200)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("ETag", f'"{hashlib.sha1(body).hexdigest()}"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self._serve(False)

        def do_GET(self) -> None:
            self._serve(True)

    return Handler


@contextmanager
def serve(hub: FakeHub) -> Iterator[FakeHub]:
    server = QuietServer(("127.0.0.1", 0), _handler(hub))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
