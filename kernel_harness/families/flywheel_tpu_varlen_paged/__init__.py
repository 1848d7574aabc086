"""flywheel-tpu-varlen-paged: flywheel-tpu's varlen attention over a paged cache (ragged prefill
and decode) on the ragged paged op."""
