"""specdec_lib: the shared library of the course "Speculative decoding, measured".

The public names below are the engine's; chapters, exercises and outside checks use them.
The packages, each importing only those listed after it:

* ``grading``: the coursework checkers, and the deliberate mistakes they must catch;
* ``course``: figure style, notebook helpers, the interactive views (needs the ``course``
  extra: matplotlib, ipywidgets);
* ``experiments``: one chapter's apparatus each (the mutant battery of chapter 7b, the
  goodput policy of chapter 10b, the comparison with transformers of chapter 11), not
  general tools;
* ``analysis``: general tools two or more chapters use (theory, exact and sampled tests of
  the output, timing, intervals, the cost models, pooled runs), by the rule its
  ``__init__`` states;
* ``engine``: TinyGPT, sampling, drafters, verification, decoding, weights, training;
* ``text``: the tokenizer and the generated language with its workloads.

Every algorithm lives in one place; the deliberate wrong variants wrap engine code.
"""

from specdec_lib.engine.drafters import Drafter, DraftModelDrafter, NgramDrafter, Proposal
from specdec_lib.engine.generate import (
    RoundRecord,
    SpeculationStats,
    generate,
    speculative_generate,
)
from specdec_lib.engine.model import KVCache, ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import (
    accept_greedy,
    accept_sampled,
    accept_sampled_biased,
    residual_distribution,
)
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_examples, workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

__all__ = [
    "DraftModelDrafter",
    "Drafter",
    "KVCache",
    "ModelConfig",
    "NgramDrafter",
    "Proposal",
    "RoundRecord",
    "SamplingParams",
    "SpeculationStats",
    "TinyGPT",
    "Tokenizer",
    "accept_greedy",
    "accept_sampled",
    "accept_sampled_biased",
    "generate",
    "load_model",
    "process_logits",
    "residual_distribution",
    "speculative_generate",
    "workload_examples",
    "workload_prompts",
]
