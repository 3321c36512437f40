"""What every layer shares: typed fields, what a perturbation acts on (modality, category), errors,
the wording of messages, optional extras, named registries, atomic files and paired statistics.

Layer 0: imports nothing else of the package.
"""
