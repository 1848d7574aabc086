"""The all-gather collective: every device of a 1-D mesh ends with the concatenation of
all devices' shards (:mod:`.cases`; the reference in :mod:`.reference`)."""
