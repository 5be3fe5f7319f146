"""Red-team review of passkey-signed approvals (issue 16) against the real brokerd.

Each test is an attack that worked before its fix (docs/decisions.md, "Red-team
review of issues 16 and 11"); brokerd runs as a real process over its sockets.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from tests.fakes.authenticator import SoftAuthenticator
from tests.fakes.brokerd import admin, connect, frame, read_frames
from tests.integration.test_passkey_brokerd import ORIGIN, make_home

__all__ = ["make_home"]


def _at_once(home: Any, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send every request on its own admin.sock connection at the same moment."""
    sockets = [connect(home.admin) for _ in requests]
    barrier = threading.Barrier(len(requests))
    answers: list[dict[str, Any]] = [{} for _ in requests]

    def send(index: int, sock: socket.socket) -> None:
        barrier.wait()
        sock.sendall(frame(requests[index]))
        answers[index] = next(read_frames(sock))

    threads = [threading.Thread(target=send, args=(i, s)) for i, s in enumerate(sockets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for sock in sockets:
        sock.close()
    return answers


def test_first_enrolments_at_once_enrol_one_passkey(make_home: Any) -> None:
    # A process on admin.sock keeps links of its own ready and races the owner's
    # first enrolment: every add passed "nothing enrolled yet" before any was
    # recorded, so all of them went in without an assertion.
    home, proc = make_home()
    adds = []
    for index in range(6):
        key = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
        link = admin(home.admin, "passkey_enrol", {"action": "add", "name": f"key{index}",
                                                    "credential_id": None})["enrolment"]
        options = admin(home.admin, "passkey_options",
                        {"token": link["token"]})["passkey_options"]
        adds.append({"v": 1, "id": index, "passkey_add": {
            "token": link["token"], "credential": key.create(options["creation"]),
            "assertion": None}})
    answers = _at_once(home, adds)
    outcomes = sorted("ok" if "ok" in a else a["error"]["code"] for a in answers)
    assert outcomes == ["ok"] + ["passkey_required"] * 5, answers
    assert len(admin(home.admin, "passkeys", {})["passkeys"]["items"]) == 1
    assert len(home.events("passkey")) == 1
    assert proc.stop() == 0
