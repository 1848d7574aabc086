"""Floor 2, records: the Family record and its hook types, mutants as data, the family
registry, implementation loading."""
