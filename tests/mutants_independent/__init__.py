"""Independently written mutants (tests/mutants_independent/): see the FAMILY_mutants modules."""
