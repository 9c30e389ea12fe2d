"""The engine: TinyGPT and its KV cache, sampling, drafters, verification, decoding.

This is the heart of the course, small modules in the spirit of gpt-fast:
``model`` (TinyGPT, KVCache), ``sampling`` (temperature, top-k, top-p in one place),
``drafters`` (prompt lookup and a draft model), ``verify`` (the greedy rule, the
residual rule and its deliberately biased twin), ``generate`` (plain decoding and the one
speculation loop, for chains, trees and batches, with honest counting), ``batched``
(plain batched decoding), ``tree`` (token trees: their layout in one pass, their
verification, how a drafter draws one), ``tree_decode`` (the tree drafters), ``heads``
(Medusa's heads), ``eagle`` and ``eagle_tree`` (an EAGLE head, its chain and its tree),
``server``, ``policies`` and ``traffic`` (continuous batching, its draft lengths, who
sends what when), ``smollm2`` (a real model in TinyGPT's shape), ``random_init`` (initial
weights that are the same on every CPU), ``weights`` (the shipped, checksummed weights)
and ``train``, ``train_heads``, ``train_eagle``, ``eagle_data`` (how they were made). It
imports only ``text`` (and ``checks``).
"""
