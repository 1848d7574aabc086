"""Floor 6, regression: golden files, the accuracy gate, the mutation self-check."""
