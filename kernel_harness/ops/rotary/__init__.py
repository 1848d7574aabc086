"""The rotary embedding op (RoPE): each token's head vectors rotated pair by pair by
angles position * inv_freq, in the split-half or interleaved pairing, over the first
``rotary_dim`` dims (the rest pass through), with its backward (the transposed rotation).

- :mod:`.reference`: the reference from the definition (angles and their cos/sin in
  float64, the rotation in float32, dx through ``jax.vjp``);
- :mod:`.cases`: the case vocabulary (sequences with position offsets, pairing, partial
  rotary, the tables a kernel takes), the strategy and events;
- :mod:`.record`: what a family's ``Family`` record takes from the op
  (:func:`~.record.rotary_record`);
- :mod:`.export`: the reference's source for exported scripts.
"""
