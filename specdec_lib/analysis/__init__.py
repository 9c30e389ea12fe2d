"""Measuring the engine: theory, hypothesis tests, timing, cost models, pooled runs.

Imports the engine and the text package; nothing in the engine imports from here.
"""
