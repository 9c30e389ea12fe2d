"""Training data for the EAGLE head, made offline: SmolLM2's own answers to prompts built from
text that ships with Python and the installed packages (self-distillation, as Medusa-2
trains its heads; EAGLE-1 trains on fixed conversations and reports little sensitivity to
it, but it drafts for models that wrote text like them), with the target's feature and top
token at every position.

Two ways to get the target's features were measured (one thread, load 2, SmolLM2 in the
course's engine): teacher forcing fixed text costs one prefill per sequence, about 230
positions a second at 512 tokens; generating the text costs one pass per new token, about
120 tokens a second at batch 16 (a pass reads the weights once for the whole batch). Both
give the feature of every position they feed, for free. Generation costs about twice as
much per position and is chosen anyway: the head must guess what SmolLM2 *writes* after a
chat turn (the measured workloads), which fixed text is not; the prompts themselves are
fixed text and are teacher-forced by the prefill. End to end (prompts prefilled, answers
generated at batch 16), the smoke runs made 65 to 110 positions a second at load 5 to 7.
Most answers run to the 192-token cap, so a batch that waits for its longest answer
wastes little.

The prompts (``_training_prompts``): standard-library functions to explain, document,
improve or continue; passages of ``pydoc`` topics and the installed packages'
descriptions to summarise; open requests built from common English words of
SmolLM2's vocabulary. **No measurement prompt leaks in**: every candidate that shares an
8-gram of tokens with a prompt the course measures on (:func:`measurement_texts`) is
dropped, and ``tests/test_eagle.py`` checks the result; so is a generated sequence whose
answer shares one.

A dataset holds, per sequence, the tokens (prompt then answer), the target's normed final
hidden state at every position but the last (fp16) and the target's argmax there (the
token its full output layer ranks first, which decides whether the draft vocabulary can
ever agree with it).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec_lib.checks import check_int
from specdec_lib.engine.generate import PAD_ID
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams, argmax, process_logits
from specdec_lib.text.stdlib_prompts import SMOLLM2_WORKLOADS, smollm2_prompts

#: The n of the leak check: no n-gram of a measurement prompt's tokens may occur in a
#: training prompt (GPT-3 and later decontaminate with 8- to 13-grams).
_LEAK_N = 8

_CODE_ASKS = (
    "Walk me through this function step by step.",
    "What does this Python code do? Answer briefly.",
    "Write a docstring for this function.",
    "Suggest one improvement to this code and show the changed lines.",
    "Describe the arguments and the return value of this function.",
    "Rewrite this function with clearer variable names.",
    "Write a unit test for this function.",
)
_TEXT_ASKS = (
    "Summarize this text in a few sentences:",
    "List the main points of this text:",
    "Explain this passage to a beginner:",
    "Write three questions a student might ask about this text:",
    "What is the most important idea in this text?",
)
_OPEN_ASKS = (
    "Tell me about {}.",
    "Write a paragraph about {}.",
    "Give me some interesting facts about {}.",
    "Explain {} to a ten-year-old.",
    "Write a short poem about {}.",
    "What are the pros and cons of {}?",
    "How would you describe {} to someone who has never seen it?",
)
_MARKERS = ("<|im_start|>", "<|im_end|>")  # SmolLM2's chat-template tokens
_SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "ensurepip", "turtledemo"}


def _chat(text: str) -> str:
    """One user turn in SmolLM2-Instruct's chat template, as the measured prompts have it
    (``stdlib_prompts``): the head learns the format it will draft in."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def measurement_texts(extra: Sequence[str] = ()) -> list[str]:
    """Every prompt the course measures SmolLM2 on (chapter 13's workloads, all eight
    prompts of each), plus ``extra``: a new benchmark's prompts belong here."""
    return [p for w in SMOLLM2_WORKLOADS for p in smollm2_prompts(w, 8)] + list(extra)


def _ngrams(ids: Sequence[int], n: int = _LEAK_N) -> set[tuple[int, ...]]:
    """The set of ``n``-grams of ``ids``."""
    return {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}


def _measured_ngrams(encode, n: int = _LEAK_N, extra: Sequence[str] = ()) -> set[tuple[int, ...]]:  # noqa: ANN001
    """The ``n``-grams of the measurement prompts' tokens (``encode``), leaving out those
    that hold a chat-template marker: every chat prompt shares the template's tokens (the
    turn's end, the assistant's start), which say nothing about what a prompt asks."""
    markers = {encode(m)[0] for m in _MARKERS}
    grams = set().union(*(_ngrams(encode(t), n) for t in measurement_texts(extra)))
    return {g for g in grams if markers.isdisjoint(g)}


def leaked(texts: Sequence[str], encode, n: int = _LEAK_N, extra: Sequence[str] = ()) -> list[int]:  # noqa: ANN001
    """Indices of ``texts`` sharing an ``n``-gram of tokens with a measurement prompt."""
    banned = _measured_ngrams(encode, n, extra)
    return [i for i, t in enumerate(texts) if not _ngrams(encode(t), n).isdisjoint(banned)]


def _stdlib_functions(limit_lines: tuple[int, int] = (6, 40)) -> list[str]:
    """Sources of top-level functions and methods of the standard library's pure-Python
    modules, in a fixed order (sorted paths; tests and the IDE left out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        if _SKIP_DIRS & set(path.relative_to(root).parts[:-1]):
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if limit_lines[0] <= node.end_lineno - first + 1 <= limit_lines[1]:
                    out.append("".join(lines[first - 1 : node.end_lineno]).rstrip() + "\n")
    return out


def _passages(max_chars: int = 1200) -> list[str]:
    """Prose: ``pydoc`` topics and the installed packages' descriptions, cut at paragraph
    boundaries into passages of 300 to ``max_chars`` characters."""
    from pydoc_data.topics import topics

    docs = [topics[k] for k in sorted(topics)]
    for dist in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"] or ""):
        body = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else ""
        docs.append(body or dist.metadata.get("Description", "") or "")
    out = []
    for doc in docs:
        chunk = ""
        for para in re.split(r"\n\s*\n", doc):
            para = para.strip()
            if not para or para.startswith(("..", "[", "<", "|", "![")):
                continue
            if len(chunk) + len(para) > max_chars and len(chunk) >= 300:
                out.append(chunk.strip())
                chunk = ""
            chunk += para + "\n\n"
        if len(chunk) >= 300:
            out.append(chunk[:max_chars].strip())
    return out


def _words(vocabulary: Sequence[str], prose: Sequence[str], count: int) -> list[str]:
    """Common English words from a byte-level BPE vocabulary (earlier ids were merged
    first, so are more frequent): lower-case pieces of 5 to 12 letters that start a word
    and occur as a whole word in ``prose`` (so not a word's first part, as "includ"),
    the 200 most frequent left out (function words: "which", "about")."""
    seen = set(re.findall(r"\b[a-z]{5,12}\b", " ".join(prose)))
    words = [t[1:] for t in vocabulary if re.fullmatch(r"Ġ[a-z]{5,12}", t) and t[1:] in seen]
    return words[200 : 200 + count]


@dataclass(frozen=True)
class PromptMix:
    """How many prompts of each kind ``_training_prompts`` builds, before the leak filter."""

    code: int = 1500  # a chat turn about a standard-library function
    text: int = 800  # a chat turn about a passage of documentation
    open: int = 1500  # an open request about a common word
    continuation: int = 400  # the first third of a function, no chat turn
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("code", "text", "open", "continuation"):
            check_int(name, getattr(self, name), 0)


def _training_prompts(vocabulary: Sequence[str], mix: PromptMix = PromptMix()) -> list[str]:
    """The candidate prompts, in a seeded order (the same on a machine with the same Python
    and packages). Not yet filtered for leaks: :func:`build_dataset` drops those."""
    rng = random.Random(mix.seed)
    functions = _stdlib_functions()
    rng.shuffle(functions)
    passages = _passages()
    rng.shuffle(passages)
    words = _words(vocabulary, passages, 4000)
    rng.shuffle(words)
    prompts = []
    for i, src in enumerate(functions[: mix.code]):
        prompts.append(_chat(f"{_CODE_ASKS[i % len(_CODE_ASKS)]}\n```python\n{src}```"))
    for i, text in enumerate(passages[: mix.text]):
        prompts.append(_chat(f"{_TEXT_ASKS[i % len(_TEXT_ASKS)]}\n\n{text}"))
    for i, word in enumerate(words[: mix.open]):
        prompts.append(_chat(_OPEN_ASKS[i % len(_OPEN_ASKS)].format(word)))
    for src in functions[mix.code : mix.code + mix.continuation]:
        lines = src.splitlines(keepends=True)
        prompts.append("".join(lines[: max(3, len(lines) // 3)]))
    rng.shuffle(prompts)
    return prompts


@dataclass(frozen=True)
class DataConfig:
    """Recipe of the self-distilled dataset."""

    max_new: int = 192  # tokens SmolLM2 writes per prompt at most (it often ends sooner)
    max_prompt: int = 448  # longer prompts are skipped
    batch: int = 16
    temperature: float = 0.7  # every other batch samples at this temperature; the rest greedy
    seed: int = 0
    mix: PromptMix = PromptMix()
    #: generate with oneDNN's kernel (:mod:`.onednn`): about 1.8 times as fast at batch 16
    #: (a probe), features equal to the default kernel's to float rounding
    onednn: bool = True

    def __post_init__(self) -> None:
        for name in ("max_new", "max_prompt", "batch"):
            check_int(name, getattr(self, name))


@torch.inference_mode()
def _distill_batch(
    model: TinyGPT,
    prompts: Sequence[list[int]],
    params: SamplingParams,
    stop: set[int],
    max_new: int,
    generator: torch.Generator | None = None,
) -> list[dict[str, torch.Tensor]]:
    """Generate answers for a batch of prompts, keeping every position's feature and argmax.

    The prefill (right-padded, as ``generate_batch``) gives the prompts' features and
    argmaxes; each step feeds one token a row and gives that token's. A row stops at a
    token of ``stop`` or after ``max_new`` tokens; the batch runs until all have stopped.
    """
    B, width = len(prompts), max(len(p) for p in prompts)
    cache = model.new_cache(B)
    ids = torch.tensor([list(p) + [PAD_ID] * (width - len(p)) for p in prompts])
    _, states = model(ids, cache, logits_to_keep=1, hidden=True)  # (B, width, C)
    cache.crop([len(p) for p in prompts])
    feats, tops, last = [], [], []
    for b, p in enumerate(prompts):  # the prompt's argmaxes, one row at a time (memory)
        logits = model.lm_head(states[b, : len(p)])  # (len(p), V)
        feats.append([states[b, : len(p)].half()])
        tops.append([torch.as_tensor(argmax(logits), dtype=torch.int32)])
        last.append(logits[-1])
    last = torch.stack(last)  # (B, V)
    out = [list(p) for p in prompts]
    done = [False] * B
    for _ in range(max_new):
        probs = process_logits(last, params)  # (B, V)
        if params.greedy:
            picks = probs.argmax(-1)
        else:
            picks = torch.multinomial(probs, 1, generator=generator)[:, 0]
        fed = [not d for d in done]  # rows whose new token is fed, so gets a feature
        for b in range(B):
            if fed[b]:
                out[b].append(int(picks[b]))
                done[b] = int(picks[b]) in stop or len(out[b]) - len(prompts[b]) == max_new
        if all(done):
            break
        logits, states = model(picks[:, None], cache, hidden=True)  # (B, 1, V), (B, 1, C)
        last = logits[:, -1]
        top = argmax(last)
        for b in range(B):
            if fed[b]:
                feats[b].append(states[b].half())
                tops[b].append(torch.tensor([top[b]], dtype=torch.int32))
    rows = []
    for b in range(B):
        n = len(out[b]) - 1  # positions with a feature: all but the last token
        rows.append(
            dict(
                tokens=torch.tensor(out[b], dtype=torch.int32),
                feats=torch.cat(feats[b])[:n],
                tops=torch.cat(tops[b])[:n],
                n_prompt=torch.tensor([len(prompts[b])]),
            )
        )
    return rows


def dataset_prompts(
    tokenizer, mix: PromptMix = PromptMix(), max_prompt: int = 448
) -> list[list[int]]:  # noqa: ANN001
    """The training prompts as token ids: the candidates of ``_training_prompts`` that
    share no 8-gram with a measurement prompt and fit in ``max_prompt``."""
    vocabulary = [tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
    prompts = _training_prompts(vocabulary, mix)
    drop = set(leaked(prompts, tokenizer.encode))
    encoded = (tokenizer.encode(p) for i, p in enumerate(prompts) if i not in drop)
    return [ids for ids in encoded if len(ids) <= max_prompt]


def _corpus_sha256(prompts: Sequence[Sequence[int]]) -> str:
    """A checksum of the training prompts' ids: it changes with the Python version or the
    installed packages, which the prompts are built from."""
    h = hashlib.sha256()
    for ids in prompts:
        h.update(json.dumps(list(ids)).encode())
    return h.hexdigest()


def _batches(prompts: Sequence[Sequence[int]], cfg: DataConfig) -> list[list[int]]:
    """The prompts' indices in batches of similar length (little padding), in a seeded
    order: the same batches on any machine with the same Python and packages."""
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
    batches = [order[j : j + cfg.batch] for j in range(0, len(order), cfg.batch)]
    random.Random(cfg.seed).shuffle(batches)
    return batches


def build_dataset(
    model: TinyGPT,
    tokenizer,
    cfg: DataConfig,
    seconds: float,
    path: Path,
    log=print,  # noqa: ANN001
    stamp: dict | None = None,
    max_batches: int | None = None,
) -> dict:
    """Self-distil into the folder ``path``, one safetensors file a batch, and return the
    dataset's metadata (with ``stamp``: the GGUF's SHA-256, say, so that stale data can be
    recognised).

    Batches run in a fixed order until ``max_batches`` exist, or for about ``seconds``
    (whole batches: the last one may overrun). Batch n decodes greedily if n is even and
    samples at ``cfg.temperature`` with a generator seeded by (``cfg.seed``, n) if odd,
    so every batch is the same whichever run made it: a run **resumes**, keeping the
    batches already on disk (made by the same recipe and stamp) and making the next ones.
    Generation is the slow part (hours for the whole corpus), so it can be spread over
    several runs. A sequence whose answer shares an 8-gram with a measurement prompt is
    dropped."""
    start = time.perf_counter()
    prompts = dataset_prompts(tokenizer, cfg.mix, cfg.max_prompt)
    batches = _batches(prompts, cfg)
    if max_batches is not None:
        batches = batches[: check_int("max_batches", max_batches, 1)]
    recipe = dict(
        config=asdict(cfg),
        corpus_sha256=_corpus_sha256(prompts),
        prompts_available=len(prompts),
        **(stamp or {}),
    )
    path.mkdir(parents=True, exist_ok=True)
    banned = _measured_ngrams(tokenizer.encode)
    stop = {tokenizer.eos_id, tokenizer.encode("<|endoftext|>")[0]}
    made = 0
    for n, batch in enumerate(batches):
        shard = path / f"batch_{n:04d}.safetensors"
        if shard.exists() and _shard_meta(shard)["recipe"] == json.loads(json.dumps(recipe)):
            continue
        if max_batches is None and time.perf_counter() - start > seconds:
            break
        greedy = n % 2 == 0
        params = SamplingParams(temperature=0.0 if greedy else cfg.temperature)
        generator = torch.Generator().manual_seed(cfg.seed * 100_003 + n)
        rows = _distill_batch(
            model, [prompts[i] for i in batch], params, stop, cfg.max_new, generator
        )
        kept = [r for r in rows if _ngrams(r["tokens"].tolist()).isdisjoint(banned)]
        tensors = _stack(kept, greedy, model.config.n_embd)
        meta = dict(recipe=recipe, batch=n, dropped_answers=len(rows) - len(kept))
        save_file(tensors, str(shard), metadata={"meta": json.dumps(meta)})
        made += 1
        log(
            f"data: batch {n + 1}/{len(batches)} ({made} made now), "
            f"{len(tensors['feats'])} positions, {time.perf_counter() - start:.0f} s"
        )
    _, meta = load_dataset(path)
    return meta


def _stack(rows: list[dict[str, torch.Tensor]], greedy: bool, C: int) -> dict[str, torch.Tensor]:
    """One batch's sequences as flat tensors (``lengths`` splits them again); ``C`` is the
    features' width."""
    if not rows:  # every answer leaked: an empty batch, still on disk so a resume skips it
        return {
            "tokens": torch.zeros(0, dtype=torch.int32),
            "feats": torch.zeros(0, C, dtype=torch.float16),
            "tops": torch.zeros(0, dtype=torch.int32),
            "lengths": torch.zeros(0, dtype=torch.int64),
            "n_prompt": torch.zeros(0, dtype=torch.int64),
            "greedy": torch.zeros(0, dtype=torch.int64),
        }
    return {
        "tokens": torch.cat([r["tokens"] for r in rows]),
        "feats": torch.cat([r["feats"] for r in rows]),
        "tops": torch.cat([r["tops"] for r in rows]),
        "lengths": torch.tensor([len(r["tokens"]) for r in rows]),
        "n_prompt": torch.cat([r["n_prompt"] for r in rows]),
        "greedy": torch.full((len(rows),), int(greedy)),
    }


def _shard_meta(shard: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(shard), "pt") as f:
        return json.loads(f.metadata()["meta"])


def load_dataset(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors of every batch :func:`build_dataset` wrote into the folder ``path``, in
    batch order, and the dataset's metadata: the recipe (which every batch must share),
    the batches, sequences, positions and answers dropped."""
    shards = sorted(Path(path).glob("batch_*.safetensors"))
    if not shards:
        raise ValueError(f"path must be a folder of batch_*.safetensors files, got {path}")
    metas = [_shard_meta(s) for s in shards]
    if any(m["recipe"] != metas[0]["recipe"] for m in metas):
        raise ValueError(f"the batches in {path} were made by different recipes: delete it")
    parts = [load_file(str(s)) for s in shards]
    tensors = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    meta = dict(
        metas[0]["recipe"],
        batches=len(shards),
        sequences=len(tensors["lengths"]),
        positions=int(tensors["feats"].shape[0]),
        dropped_answers=sum(m["dropped_answers"] for m in metas),
        python=sys.version.split()[0],
    )
    return tensors, meta
