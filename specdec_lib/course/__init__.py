"""What the chapters display: figure style, notebook helpers and the interactive views.

Needs matplotlib and ipywidgets (the ``course`` extra); the engine never imports it.
"""
