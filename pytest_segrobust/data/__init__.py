"""Datasets: the protocol the harness reads samples through, and readers of the published
layouts (folders, COCO, DAVIS, YouTube-VOS, AVSBench, ...) and the embedded demo data.

Layer 2: imports the layers below (core, randomness, runtime, provenance, store).
"""
