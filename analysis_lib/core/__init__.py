"""Core: the typed trial, safe file reading and atomic writing, the tool taxonomy, the metric registry and the success rule.

Everything else imports this layer; it imports nothing of the package.
"""
