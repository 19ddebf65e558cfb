"""Report: the paper's tables, figures, LaTeX snippets and Markdown, made from the analysis outputs.

Small modules, one concept each: :mod:`.tables` (tidy summary frames), :mod:`.figures` (seaborn
figures saved reproducibly), :mod:`.latex` (booktabs tables and the macros file), :mod:`.markdown`
(``paper_snippets.md``).
"""
