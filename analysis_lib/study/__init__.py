"""Study: the study file, the analysis plan and its pre-registration, the baseline rule, the placed trials table
and the design audit, resolved once into the ``Study`` every later stage is handed.
"""
