"""Inference: the plan-driven comparisons (the only place comparisons are made), rates, repetitions, power,
subgroups, hypotheses and sequential designs; the estimands beside intention to treat in :mod:`.beside_itt`.
"""
