"""The embedded local model (boxmaker/stack/_local.py): where it lives, when it
is ready, the llama-server argv, and waiting for health against a real HTTP
server that answers 503 while it loads."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker._errors import ConfigurationError
from boxmaker._http._http11 import HttpRequest, HttpResponse, serve_tcp
from boxmaker.stack._fetch_model import cache_root
from boxmaker.stack._local import (
    CONTEXT,
    N_CTX_PER_SLOT,
    PACKAGED_TEMPLATES,
    SLOTS,
    TEMPLATE_ENV,
    THREADS_ENV,
    LocalModel,
    build_script,
    free_port,
    local_threads,
    wait_healthy,
)
from boxmaker.stack._models import DEFAULT_MODEL, MODELS, TEMPLATE_NAME, TEMPLATES


def test_the_cache_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_CACHE", str(tmp_path))
    local = LocalModel.in_cache()
    assert cache_root() == tmp_path / "llama"
    assert local.server == tmp_path / "llama" / "bin" / "llama-server"
    assert local.model == tmp_path / "llama" / "models" / DEFAULT_MODEL.file
    assert local.template == PACKAGED_TEMPLATES / DEFAULT_MODEL.template
    assert local.template.is_file()
    sdist = LocalModel.in_cache(MODELS["smollm2-135m"])
    assert sdist.template == tmp_path / "llama" / "templates" / TEMPLATE_NAME


def test_the_template_can_be_chosen_for_the_benches(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_CACHE", str(tmp_path))
    monkeypatch.setenv(TEMPLATE_ENV, TEMPLATE_NAME)
    assert LocalModel.in_cache().template == tmp_path / "llama" / "templates" / TEMPLATE_NAME
    monkeypatch.setenv(TEMPLATE_ENV, "../../etc/passwd")
    with pytest.raises(ConfigurationError, match="none of"):
        LocalModel.in_cache()


def test_every_packaged_template_renders_a_tool_call_as_its_fence() -> None:
    for name in TEMPLATES:
        path = PACKAGED_TEMPLATES / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            fence = "```tool_call" if "tool-call" in name else "```json"
            assert "'\\n" + fence + '\\n{"name": "\' }}' in text, name  # the rendered call
            assert "answer with only this block" in text, name


def test_ready_only_with_server_template_and_the_stamped_model(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOXMAKER_CACHE", str(tmp_path))
    local = LocalModel.in_cache(MODELS["smollm2-135m"])  # its template is in the cache
    assert not local.ready
    for path in (local.server, local.template, local.model):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    assert not local.ready  # no stamp: the model is not known to be the pinned one
    stamp = local.model.with_name(f".{local.model.name}.source")
    stamp.write_text("something else\n")
    assert not local.ready
    stamp.write_text(MODELS["smollm2-135m"].stamp + "\n")
    assert local.ready


def test_argv_matches_loopds_self_test_and_the_models_flags(tmp_path: Path) -> None:
    for spec in MODELS.values():
        local = LocalModel(spec=spec, server=tmp_path / "s", model=tmp_path / "m",
                           template=tmp_path / "t")
        argv = local.argv(8081, tmp_path / "slots", threads=3)
        assert argv[0] == str(tmp_path / "s")
        pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
        assert argv[argv.index("--host") + 1] == "127.0.0.1"  # loopback only
        assert argv[argv.index("--port") + 1] == "8081"
        assert argv[argv.index("-c") + 1] == str(CONTEXT)
        assert argv[argv.index("-np") + 1] == str(SLOTS) and CONTEXT // SLOTS == N_CTX_PER_SLOT
        assert argv[argv.index("-t") + 1] == "3"
        assert argv[argv.index("--chat-template-file") + 1] == str(tmp_path / "t")
        assert argv[argv.index("--slot-save-path") + 1] == str(tmp_path / "slots")
        assert argv[argv.index("--cache-ram") + 1] == "0"  # loopd's slot files, no RAM copies
        assert "--jinja" in argv and pairs["-m"] == str(tmp_path / "m")
        for flag in spec.server_flags:
            assert flag in argv


def test_threads_from_the_environment_else_the_cores(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    local = LocalModel(spec=DEFAULT_MODEL, server=tmp_path / "s", model=tmp_path / "m",
                       template=tmp_path / "t")
    monkeypatch.delenv(THREADS_ENV, raising=False)
    cores = str(local_threads())
    assert local.argv(1, tmp_path)[local.argv(1, tmp_path).index("-t") + 1] == cores
    monkeypatch.setenv(THREADS_ENV, "1")
    argv = local.argv(1, tmp_path)
    assert argv[argv.index("-t") + 1] == "1" and local_threads() == 1
    for bad in ("0", "-1", "two", "257", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ConfigurationError, match=THREADS_ENV):
            local_threads()


def test_the_default_model_runs_the_template_that_says_act() -> None:
    text = (PACKAGED_TEMPLATES / DEFAULT_MODEL.template).read_text(encoding="utf-8")
    assert DEFAULT_MODEL.template == "qwen2.5-fenced-tool-call-examples.jinja"
    assert "call it at once" in text and "Do not describe the call" in text
    assert "When the user asks to see, explain or repeat a call, answer in words" in text
    act = (PACKAGED_TEMPLATES / "qwen2.5-fenced-tool-call-act.jinja").read_text(encoding="utf-8")
    # the act template's words, then the fixed examples: a real call, two shown as text
    [words] = [line for line in act.splitlines() if "call it at once" in line]
    assert words in text.splitlines()
    after = text.split("answer in plain words without a block.<|im_end|>")[1]
    examples = after.splitlines()[1]
    assert examples.count("```tool_call") == 1 and examples.lower().count("as text") == 2
    # four exchanges (a question answered in words first) and the tool response, a user turn
    assert examples.count("<|im_start|>user") == 5 and "Jupiter" in examples
    assert "```json" not in examples


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def test_the_build_script_of_this_checkout() -> None:
    script = build_script()
    assert script is not None and script.name == "get-llama-server" and script.is_file()


@pytest.fixture
def patient_clock() -> trio.testing.MockClock:
    """Jumps over the 0.2 s polls, but only once real I/O has been idle for 0.1 s
    (the autojump clock would also jump while a real socket is being answered)."""
    return trio.testing.MockClock(autojump_threshold=0.1)


async def test_wait_healthy_waits_through_loading(patient_clock: trio.abc.Clock) -> None:
    answers = 0

    async def health(request: HttpRequest) -> HttpResponse:
        nonlocal answers
        answers += 1
        if answers < 4:
            body = {"error": {"code": 503, "message": "Loading model",
                              "type": "unavailable_error"}}
            return HttpResponse(status=503, body=json.dumps(body).encode(),
                                content_type="application/json")
        return HttpResponse(status=200, body=b'{"status":"ok"}',
                            content_type="application/json")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(serve_tcp, health, "127.0.0.1", 0)
            await wait_healthy(listeners[0].socket.getsockname()[1])
            nursery.cancel_scope.cancel()
    assert answers >= 4  # three 'Loading model', then ok
