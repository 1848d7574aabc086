"""What every flywheel-tpu family shares: the release tested, how to install it, and
whether it can be here (:mod:`.library`)."""
