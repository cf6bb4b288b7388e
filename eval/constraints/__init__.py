"""Coverage-conditioned questions: do answers honour "cover X, but skip Y"? (issue 8, part 3)

A question plus an instruction to include one subtopic and leave out another
(as in Jeong et al.'s QTREE/QPlanner) tests whether the system carries a
user's scope into its plans and answer. This package measures it, in three
steps that each keep what they did on disk:

1. set building (``dataset``): Wiki-NFQA questions get 3-4 subtopics from an
   LLM; our code picks one to include and one to exclude from a seed and
   writes the conditioned question from fixed templates, so the set can be
   rebuilt exactly;
2. answering (``runner``): per arm (``constraints.mode`` off / cue / always),
   Typed-RAG answers every conditioned question, with the full trace, in a
   run directory that a rerun resumes;
3. judging (``judge``): a judge LLM says, per include topic, whether the
   answer covers it, and per exclude topic, whether it discusses it.
   Verdicts that never parse are counted, never guessed.

``report`` turns a run into rates with bootstrap CIs per arm, paired
differences to the first arm, detection and cost; ``topics`` holds the topic
matching they share. Every name is importable from ``eval.constraints``.
"""

from __future__ import annotations

from eval.answer_coverage.parse import BAD_SHAPE, NO_JSON
from eval.constraints.dataset import (
    CANDIDATE_FACTOR,
    FACTOID_LIKE,
    MAX_SUBTOPIC_CHARS,
    MAX_SUBTOPIC_WORDS,
    MAX_SUBTOPICS,
    MIN_SUBTOPICS,
    OVERLAPPING,
    SUBTOPIC_MAX_TOKENS,
    SUBTOPICS_SCHEMA,
    SYSTEM_PROMPT,
    TEMPLATES,
    TOO_FEW,
    ConstraintItem,
    SetBuild,
    build_constraint_set,
    candidate_order,
    compose_question,
    load_set,
    make_item,
    parse_subtopics,
    subtopics_messages,
    write_set,
)
from eval.constraints.judge import (
    EMPTY_ANSWER,
    LENGTH_MISMATCH,
    ComplianceItem,
    ComplianceJudge,
    ComplianceVerdict,
    Verdict,
    compliance,
    judge_messages,
    judge_schema,
    parse_judgement,
)
from eval.constraints.report import (
    METRIC_TITLES,
    METRICS,
    REPORT_JSON,
    REPORT_MD,
    build_constraints_report,
    detection_match,
    render_constraints_report,
    write_constraints_report,
)
from eval.constraints.runner import (
    ANSWERS,
    ARMS,
    ERRORS,
    JUDGEMENTS,
    LINKAGE,
    SET_COPY,
    ArmAnswerers,
    ConstraintRunner,
    ConstraintRunStats,
    SharedTypedRAG,
    arm_settings,
    check_run_set,
    file_sha256,
    parse_arms,
)
from eval.constraints.topics import topics_overlap

__all__ = [
    "ANSWERS",
    "ARMS",
    "BAD_SHAPE",
    "CANDIDATE_FACTOR",
    "EMPTY_ANSWER",
    "ERRORS",
    "FACTOID_LIKE",
    "JUDGEMENTS",
    "LINKAGE",
    "LENGTH_MISMATCH",
    "MAX_SUBTOPICS",
    "MAX_SUBTOPIC_CHARS",
    "MAX_SUBTOPIC_WORDS",
    "METRICS",
    "METRIC_TITLES",
    "MIN_SUBTOPICS",
    "NO_JSON",
    "OVERLAPPING",
    "REPORT_JSON",
    "REPORT_MD",
    "SET_COPY",
    "SUBTOPICS_SCHEMA",
    "SUBTOPIC_MAX_TOKENS",
    "SYSTEM_PROMPT",
    "TEMPLATES",
    "TOO_FEW",
    "ArmAnswerers",
    "ComplianceItem",
    "ComplianceJudge",
    "ComplianceVerdict",
    "ConstraintItem",
    "ConstraintRunStats",
    "ConstraintRunner",
    "SetBuild",
    "SharedTypedRAG",
    "Verdict",
    "arm_settings",
    "build_constraint_set",
    "build_constraints_report",
    "candidate_order",
    "check_run_set",
    "compliance",
    "compose_question",
    "detection_match",
    "file_sha256",
    "judge_messages",
    "judge_schema",
    "load_set",
    "make_item",
    "parse_arms",
    "parse_judgement",
    "parse_subtopics",
    "render_constraints_report",
    "subtopics_messages",
    "topics_overlap",
    "write_constraints_report",
    "write_set",
]
