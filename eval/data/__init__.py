"""What an evaluation reads: Wiki-NFQA and graded question files, labels, gold answers, selection."""
