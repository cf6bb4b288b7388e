"""Training the question-type classifier: the NF-CATS data, the embedding head and the lexical
part, fine-tuning, calibration, metrics and cross-validation (the runtime's
:mod:`typed_rag.classifier` only loads an artefact and predicts)."""
