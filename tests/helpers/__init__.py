"""Helpers shared by the tests: toy families, planted implementations, mutant catalogs."""
