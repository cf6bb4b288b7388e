"""Reports of a run: LINKAGE metrics, paired comparisons, tables, Markdown and figures."""
