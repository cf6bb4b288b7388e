"""QTREE dataset building and QPlanner training (Jeong et al.).

- ``dataset`` / ``summary``: the resumable build over a question set, its summary and the
  SFT / DPO examples it yields;
- ``judge``: each outline scored 1-5 for the conditioned question (deterministic);
- ``planner``: QPlanner trained with TRL (SFT then DPO with LoRA; needs the ``planner`` extra).
"""
