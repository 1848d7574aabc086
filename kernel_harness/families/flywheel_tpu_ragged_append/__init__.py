"""The flywheel-tpu-ragged-append family (flywheel-tpu's ``append_ragged``)."""
