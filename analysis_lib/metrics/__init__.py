"""Metrics: Layer 1 computed from each trial (tokens counted once per API call, prices), the trials table and its cache.

Nothing here knows a study: rows carry each trial as its source names it; :mod:`analysis_lib.study` places them in arms.
"""
