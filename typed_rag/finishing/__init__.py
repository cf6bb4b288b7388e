"""The answer's last steps, after generation: citation checks and post-hoc citing, removal of
prompt echoes, copied passages, repeats, cut-off endings and talk about the pipeline.

``finish.finish`` runs them in order; each step is a small module of its own.
"""
