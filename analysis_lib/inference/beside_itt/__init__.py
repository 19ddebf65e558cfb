"""Estimands beside intention to treat: the effect among MCP users (CACE), bounds for infrastructure failures,
where discordant trajectories diverge, and mediation; :mod:`.estimands` runs what the plan declares.
"""
