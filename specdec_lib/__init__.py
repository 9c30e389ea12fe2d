"""specdec_lib: the shared library of the course "Speculative decoding, measured".

Every chapter imports from here; nothing is implemented twice.
"""

from .data import workload_examples, workload_prompts
from .drafters import Drafter, DraftModelDrafter, NgramDrafter, Proposal
from .generate import RoundRecord, SpeculationStats, generate, speculative_generate
from .model import KVCache, ModelConfig, TinyGPT
from .sampling import SamplingParams, process_logits
from .tokenizer import Tokenizer
from .verify import accept_greedy, accept_sampled, accept_sampled_biased, residual_distribution
from .weights import load_model

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
