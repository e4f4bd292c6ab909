"""The benchmark workloads: the seed's four shapes (cmd/radixbench, scale 1) and the SGLang paper's own.

A workload is an ordered list of requests (token-id tuples) in *arrival* order. Shared prefixes are
literally the same ids. Every workload is built from *segments*; each segment's first id is drawn
without replacement from a seeded permutation of the vocabulary, so two segments never begin with
the same id: requests share exactly the prefixes their shape says they share, never an extra
token by accident (which would nudge the hit rates off the seed's exact figures).

``scale`` multiplies every length (not the counts), so hit rates do not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# The default synthetic model's vocabulary; the real SmolLM2 (49152) accepts these ids too, so both
# live arms serve byte-for-byte the same requests and the token tables are model-independent.
VOCAB = 384
DEFAULT_SEED = 0

SEED_ORIGIN = "seed (fak cmd/radixbench)"
OURS_ORIGIN = "ours (SGLang paper shape)"


@dataclass(frozen=True)
class Workload:
    """An ordered request set. ``requests`` are in arrival order (FCFS serves them as given)."""

    name: str
    description: str
    params: dict[str, int]
    requests: tuple[tuple[int, ...], ...]
    origin: str = SEED_ORIGIN
    notes: list[str] = field(default_factory=list, compare=False)

    @property
    def total_tokens(self) -> int:
        return sum(len(r) for r in self.requests)

    @property
    def max_len(self) -> int:
        return max(len(r) for r in self.requests)


class Segments:
    """Seeded token segments whose first ids are pairwise distinct (see the module docstring)."""

    def __init__(self, seed: int, vocab: int = VOCAB) -> None:
        self.vocab = vocab
        self._rng = np.random.default_rng(seed)
        self._firsts = [int(i) for i in self._rng.permutation(vocab)]
        self._used = 0

    def __call__(self, n: int) -> tuple[int, ...]:
        if n <= 0:
            raise ValueError(f"segment length must be positive, got {n}")
        if self._used == len(self._firsts):
            raise ValueError(f"more than {self.vocab} segments: first ids would repeat")
        first = self._firsts[self._used]
        self._used += 1
        rest = self._rng.integers(0, self.vocab, size=n - 1)
        return (first, *(int(t) for t in rest))


# ---- the seed's four shapes ------------------------------------------------------------------


def few_shot(scale: int = 1, seed: int = DEFAULT_SEED, preamble: int = 256, question: int = 16, n: int = 16) -> Workload:
    """N questions share one few-shot preamble (MMLU 5-shot shape)."""
    seg = Segments(seed)
    pre = seg(preamble * scale)
    reqs = tuple(pre + seg(question * scale) for _ in range(n))
    return Workload(
        "few-shot", "N questions share one few-shot preamble", {"preamble": preamble * scale, "question": question * scale, "N": n}, reqs
    )


def multi_turn(scale: int = 1, seed: int = DEFAULT_SEED, base: int = 64, turn: int = 32, turns: int = 8) -> Workload:
    """One conversation; request k is the base context plus k turns (the whole history so far)."""
    seg = Segments(seed + 1)
    ctx = seg(base * scale)
    reqs = [ctx]
    for _ in range(1, turns):
        ctx = ctx + seg(turn * scale)
        reqs.append(ctx)
    return Workload(
        "multi-turn chat",
        "each request is the whole history so far",
        {"base": base * scale, "turn": turn * scale, "turns": turns},
        tuple(reqs),
    )


def tree_of_thought(
    scale: int = 1, seed: int = DEFAULT_SEED, root: int = 64, seg_len: int = 16, fanout: int = 3, depth: int = 3
) -> Workload:
    """A reasoning tree; the requests are the root-to-leaf paths (depth-first generation order)."""
    seg = Segments(seed + 2)
    paths: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...], level: int) -> None:
        if level == depth:
            paths.append(prefix)
            return
        for _ in range(fanout):
            grow(prefix + seg(seg_len * scale), level + 1)

    grow(seg(root * scale), 0)
    params = {"root": root * scale, "segment": seg_len * scale, "fanout": fanout, "depth": depth, "leaves": len(paths)}
    return Workload("tree-of-thought", "siblings share every ancestor; requests are root-to-leaf paths", params, tuple(paths))


def agents(scale: int = 1, seed: int = DEFAULT_SEED, system: int = 128, step: int = 24, n_agents: int = 5, turns: int = 6) -> Workload:
    """C agents share a system prompt; each appends a step per turn; arrivals are turn-major."""
    seg = Segments(seed + 3)
    sys_prompt = seg(system * scale)
    ctx = [sys_prompt] * n_agents
    reqs = []
    for _ in range(turns):  # all agents' turn 1, then turn 2, ...: concurrent agents interleave
        for a in range(n_agents):
            ctx[a] = ctx[a] + seg(step * scale)
            reqs.append(ctx[a])
    params = {"system": system * scale, "step": step * scale, "agents": n_agents, "turns": turns}
    return Workload("agents", "concurrent agents share a system prompt; arrivals interleaved turn-major", params, tuple(reqs))


SEED_WORKLOADS: tuple[Callable[..., Workload], ...] = (few_shot, multi_turn, tree_of_thought, agents)


def seed_workloads(scale: int = 1, seed: int = DEFAULT_SEED) -> list[Workload]:
    """The seed benchmark's four workloads, in the ledger's order."""
    return [make(scale=scale, seed=seed) for make in SEED_WORKLOADS]


# ---- the SGLang paper's own shapes where they differ from the seed's (ours, clearly labelled) ----


def _lengths(rng: np.random.Generator, lo: int, hi: int, n: int, scale: int) -> list[int]:
    return [int(x) * scale for x in rng.integers(lo, hi + 1, size=n)]


def paper_multi_turn(scale: int = 1, seed: int = DEFAULT_SEED, conversations: int = 8, turns: int = 4, output: int = 8) -> Workload:
    """SGLang §6 multi-turn chat (short output): 4 turns of 256-512-token user inputs, short replies.

    Our rendering: ``conversations`` independent chats (no shared system prompt), arriving
    turn-major as concurrent users would; turn t's request is the whole history (inputs and the
    ``output``-token replies of earlier turns) plus the new input.
    """
    seg = Segments(seed + 10)
    rng = np.random.default_rng(seed + 11)
    inputs = [_lengths(rng, 256, 512, turns, scale) for _ in range(conversations)]
    hist: list[tuple[int, ...]] = [() for _ in range(conversations)]
    reqs = []
    for t in range(turns):
        for c in range(conversations):
            if t > 0:
                hist[c] = hist[c] + seg(output * scale)  # the model's reply to the previous turn
            hist[c] = hist[c] + seg(inputs[c][t])
            reqs.append(hist[c])
    params = {"conversations": conversations, "turns": turns, "input_min": 256 * scale, "input_max": 512 * scale, "output": output * scale}
    return Workload(
        "paper multi-turn chat",
        "4 turns of 256-512-token inputs, short replies; concurrent chats interleaved",
        params,
        tuple(reqs),
        OURS_ORIGIN,
    )


def paper_hellaswag(scale: int = 1, seed: int = DEFAULT_SEED, shots: int = 20, questions: int = 8, choices: int = 4) -> Workload:
    """SGLang §6 HellaSwag 20-shot: a shared 20-example preamble, then per question a context
    shared by its 4 candidate endings (two-level sharing); requests arrive question by question."""
    seg = Segments(seed + 20)
    rng = np.random.default_rng(seed + 21)
    pre: tuple[int, ...] = ()
    for n in _lengths(rng, 40, 80, shots, scale):  # each few-shot example: context + ending
        pre = pre + seg(n)
    reqs = []
    for ctx_len in _lengths(rng, 30, 60, questions, scale):
        ctx = pre + seg(ctx_len)
        for end_len in _lengths(rng, 10, 30, choices, scale):
            reqs.append(ctx + seg(end_len))
    params = {"shots": shots, "preamble": len(pre), "questions": questions, "choices": choices}
    return Workload("paper HellaSwag 20-shot", "shared 20-shot preamble; 4 endings share each question", params, tuple(reqs), OURS_ORIGIN)


def paper_workloads(scale: int = 1, seed: int = DEFAULT_SEED) -> list[Workload]:
    """Our renderings of the SGLang paper's shapes that the seed's four do not cover."""
    return [paper_multi_turn(scale, seed), paper_hellaswag(scale, seed)]
