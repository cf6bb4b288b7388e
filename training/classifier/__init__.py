"""Training the question-type classifier: the embedding head, fine-tuning, cross-validation."""
