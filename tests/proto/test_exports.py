"""The public surface of boxmaker.proto: what is exported, and that it is all real."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = ["boxmaker.proto", "boxmaker.proto.wire", "boxmaker.proto.broker",
          "boxmaker.proto.admin", "boxmaker.proto.loop", "boxmaker.proto.audit",
          "boxmaker.proto.chain", "boxmaker.proto.args", "boxmaker.policy"]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_exported_name_exists_and_nothing_private_leaks(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(set(exported)) == len(exported), "a name is exported twice"
    for item in exported:
        assert not item.startswith("_"), item
        assert hasattr(module, item), f"{name}.{item} is exported but missing"


def test_the_core_names() -> None:
    import boxmaker.proto as proto

    for item in ("DecodeError", "FrameDecoder", "encode_frame", "decode", "encode",
                 "escape_text", "escape_line", "Taint", "U64"):
        assert item in proto.__all__


def test_sockets_and_audit_each_have_their_own_call() -> None:
    from boxmaker.proto import audit, broker

    assert broker.Call is not audit.Call


def test_proto_and_policy_never_import_trio() -> None:
    code = ("import sys; import boxmaker.proto, boxmaker.proto.wire, boxmaker.proto.broker, "
            "boxmaker.proto.admin, boxmaker.proto.loop, boxmaker.proto.audit, "
            "boxmaker.proto.chain, boxmaker.proto.args, boxmaker.policy; "
            "print('trio' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
