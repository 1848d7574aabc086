"""Floor 2, spec: the Family spec and its hook types, mutants as data, the family
registry, implementation loading."""
