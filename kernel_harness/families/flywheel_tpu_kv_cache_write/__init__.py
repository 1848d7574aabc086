"""The flywheel-tpu-kv-cache-write family (flywheel-tpu's ``pallas.kv_cache_write``)."""
