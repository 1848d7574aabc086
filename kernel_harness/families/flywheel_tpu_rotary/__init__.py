"""The flywheel-tpu-rotary family (flywheel-tpu's ``pallas.rotary``)."""
