"""The delta-rule (linear attention) op: cases (:mod:`.cases`), the strategy and its events
(:mod:`.strategy`), the token-serial reference and its vjp (:mod:`.reference`), and the op's
relations (:mod:`.relations`: state continuity across a split, linearity in v); served
(:mod:`.serving`): a ragged batch with a conv1d pre-stage, gates from raw inputs (per head
or per key channel) and states in slot pools."""
