"""The public surface of boxmaker.proto: what is exported, and that it is all real."""

from __future__ import annotations

import importlib
import subprocess
import sys

import boxmaker.policy


def test_every_exported_name_exists_and_nothing_private_leaks() -> None:
    module = importlib.import_module("boxmaker.proto")
    exported = module.__all__
    assert len(set(exported)) == len(exported), "a name is exported twice"
    for item in exported:
        assert not item.startswith("_"), item
        assert hasattr(module, item), f"boxmaker.proto.{item} is exported but missing"


def test_the_core_names() -> None:
    import boxmaker.proto as proto

    for item in ("DecodeError", "FrameDecoder", "encode_frame", "decode", "encode",
                 "escape_text", "escape_line", "Taint", "U64"):
        assert item in proto.__all__


def test_the_policy_package_re_exports_nothing() -> None:
    """Its modules are imported by name: one name for each thing (issue 12)."""
    assert [n for n in vars(boxmaker.policy) if not n.startswith("_")] == []


def test_proto_and_policy_never_import_trio() -> None:
    code = ("import sys; import boxmaker.proto, boxmaker.proto.wire._wire_broker, "
            "boxmaker.proto.wire._wire_admin, boxmaker.proto.wire._wire_loop, "
            "boxmaker.proto.audit._audit, boxmaker.proto.audit._verify, boxmaker.proto.tools, "
            "boxmaker.policy._decide, "
            "boxmaker.policy._load, boxmaker.policy._explain; print('trio' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
