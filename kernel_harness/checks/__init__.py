"""Floor 4, checks: the properties (matches-reference, metamorphic, lowering) and the
sharding and bad-input checks."""
