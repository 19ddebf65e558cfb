"""The seeded simulator of A/B/C agent runs (SIMULATED data, never findings): a latent metrics model, a writer
of the run layout, imperfect studies for calibration, and the benchmark runner's record of a simulated run.
"""
