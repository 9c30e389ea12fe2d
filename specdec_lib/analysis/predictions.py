"""Speed-ups predicted from measured unit costs: in sample, and for another run.

:class:`~specdec_lib.analysis.costs.UnitCosts` prices each operation a request is made of
(a pass over T positions, a draft pass, a lookup, the host's work per step and per round).
Here those prices, measured by ``benchmarks/wall_clock.py`` (``measure_unit_costs`` in
``benchmarks/measures.py``), are read back (:func:`unit_costs_from_result`), and
multiplied by the counts a run produced (:func:`request_log`, :func:`request_logs`,
:func:`predicted_speedup`). A prediction is
worth quoting only out of sample: :func:`predict_other_run` prices one run's round logs
with the costs another run measured, beside the textbook formula with the same costs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from specdec_lib.analysis.costs import PassCostFit, UnitCosts
from specdec_lib.analysis.theory import CostAwareK, expected_speedup
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import (
    AdaptiveK,
    RoundRecord,
    SpeculationStats,
    speculative_generate,
)
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


def unit_costs_from_result(units: Mapping[str, object]) -> UnitCosts:
    """The :class:`UnitCosts` a ``wall_clock.py`` result file recorded (its ``unit_costs``),
    so that one run's measured costs can predict another run's times."""
    try:
        return UnitCosts(
            pass_fit=PassCostFit(
                fixed=units["target_pass_fixed_s"], per_position=units["target_pass_per_position_s"]
            ),
            draft_pass=units["draft_pass_s"],
            lookup=units["lookup_s"],
            prefill={int(n): t for n, t in units["prefill_s"].items()},
            host_step=units["host_step_s"],
            host_round=units["host_round_s"],
            host_draft_step=units["host_draft_step_s"],
            single_pass=units["target_pass_s"],
        )
    except KeyError as missing:
        raise ValueError(
            f"units must hold every unit cost wall_clock.py records; {missing} is missing"
        ) from None


def request_log(rounds: Sequence[RoundRecord], draft_passes: int, emitted: int) -> dict:
    """One request's round log as :func:`predicted_speedup` reads it (and result files
    store it): each round's proposal length, acceptance and k, the request's draft passes
    and emitted tokens; from it a prediction can be redone with any unit costs."""
    return {
        "proposal_lengths": [len(r.proposed) for r in rounds],
        "accepted": [r.n_accepted for r in rounds],
        "ks": [r.k for r in rounds],
        "draft_passes": draft_passes,
        "emitted": emitted,
    }


def request_logs(
    target: TinyGPT,
    make_drafter: Callable[[], Drafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    k: int,
    adaptive_k: AdaptiveK | CostAwareK | None = None,
    greedy: Sequence[Sequence[int]] | None = None,
) -> list[dict]:
    """Decode every prompt with a fresh drafter from draft length ``k`` (steered by
    ``adaptive_k`` if given) and return each request's :func:`request_log`, untimed, for
    :func:`predicted_speedup` to price. With ``greedy`` (plain decoding's outputs, one per
    prompt) every output is checked against it, so a policy can never be priced for
    output it changed."""
    if greedy is not None and len(greedy) != len(prompts):
        raise ValueError(
            f"greedy must hold one output per prompt ({len(prompts)}), got {len(greedy)}"
        )
    out = []
    for i, ids in enumerate(prompts):
        s = SpeculationStats()
        got = speculative_generate(
            target, make_drafter(), list(ids), params, k=k, stats=s, adaptive_k=adaptive_k
        )
        if greedy is not None and got != list(greedy[i]):
            raise AssertionError(f"the output of prompt {i} differs from plain greedy decoding")
        out.append(request_log(s.log, s.draft_passes, s.emitted))
    return out


def predicted_speedup(
    costs: UnitCosts,
    prompt_lengths: Sequence[int],
    tokens: int,
    requests: Sequence[Mapping[str, object]],
    drafter: str,
) -> float:
    """Predicted speed-up over plain decoding of the requests whose round logs are given
    (each with ``proposal_lengths`` and ``draft_passes``), from ``costs``: total predicted
    plain time over total predicted speculative time. ``drafter`` is ``"ngram"`` (a lookup
    per round) or ``"draft"`` (draft passes, no lookup)."""
    if drafter not in ("ngram", "draft"):
        raise ValueError(f"drafter must be 'ngram' or 'draft', got {drafter!r}")
    if len(prompt_lengths) != len(requests) or not requests:
        raise ValueError("prompt_lengths and requests must hold one entry per request")
    plain = sum(costs.plain_request(n, tokens) for n in prompt_lengths)
    spec = sum(
        costs.speculative_request(
            n,
            r["proposal_lengths"],
            r["draft_passes"],
            len(r["proposal_lengths"]) if drafter == "ngram" else 0,
        )
        for n, r in zip(prompt_lengths, requests, strict=True)
    )
    return plain / spec


def predict_other_run(units_from: Mapping, measured: Mapping, counts: Mapping) -> list[dict]:
    """Out of sample: the unit costs one ``wall_clock.py`` run measured (``units_from``, its
    ``unit_costs``) predict every fixed-k row another run measured (``measured``), from the
    round logs of ``wall_clock.py --counts-only`` (``counts``). Each row holds the measured
    speed-up and interval, the cost model's prediction and the textbook's
    :func:`~specdec_lib.analysis.theory.expected_speedup` with the same run's c, lookup
    and verification costs and the row's fitted acceptance rate."""
    costs = unit_costs_from_result(units_from)
    tokens = counts["tokens_per_prompt"]
    if tokens != measured["tokens_per_prompt"]:
        raise ValueError(
            f"counts were taken at {tokens} tokens, measured at {measured['tokens_per_prompt']}"
        )
    out = []
    for r in measured["rows"]:
        if r["drafter"] == "none" or r["adaptive"]:
            continue
        scenario = counts["scenarios"][r["workload"]]
        requests = scenario["requests"][r["method"]]
        if sum(len(q["proposal_lengths"]) for q in requests) != r["rounds"]:
            raise ValueError(f"counts and measured run disagree on the rounds of {r['method']}")
        k, ngram = r["k"], r["drafter"] == "ngram"
        textbook = expected_speedup(
            r["alpha"],
            k,
            0.0 if ngram else units_from["c_draft"],
            units_from["verify_cost"][str(k)],
            units_from["c_lookup"] if ngram else 0.0,
        )
        out.append(
            {
                "workload": r["workload"],
                "method": r["method"],
                "drafter": r["drafter"],
                "k": k,
                "measured": r["speedup"],
                "low": r["speedup_low"],
                "high": r["speedup_high"],
                "model": predicted_speedup(
                    costs, scenario["prompt_lengths"], tokens, requests, r["drafter"]
                ),
                "textbook": textbook,
            }
        )
    return out
