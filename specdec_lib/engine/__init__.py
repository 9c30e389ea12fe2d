"""The engine: TinyGPT and its KV cache, sampling, drafters, verification, decoding.

This is the heart of the course, small modules in the spirit of gpt-fast:
``model`` (TinyGPT, KVCache), ``sampling`` (temperature, top-k, top-p in one place),
``drafters`` (prompt lookup and a draft model), ``verify`` (the greedy rule, the
residual rule and its deliberately biased twin), ``generate`` (plain and speculative
decoding, honest counting), ``batched`` (batched verification), ``random_init`` (initial
weights that are the same on every CPU), ``weights`` (the shipped,
checksummed weights) and ``train`` (how they were made). It imports only ``text`` (and ``checks``).
"""
