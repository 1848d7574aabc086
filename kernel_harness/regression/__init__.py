"""Floor 5, regression: golden files, the accuracy gate, the mutation self-check."""
