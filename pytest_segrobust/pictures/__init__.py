"""What the report's pictures show, as values (measured where models run, drawn by the
report), and the class views they are drawn from.

Layer 2: imports the layers below (core, randomness, runtime, provenance, store).
"""
