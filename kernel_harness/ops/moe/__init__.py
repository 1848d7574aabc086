"""The mixture-of-experts op: top-k routing of tokens by scored gating logits, a gated
two-layer FFN per expert, the routed outputs combined by their routing weights; experts
sharded over a mesh (expert parallel) (:mod:`.cases`, :mod:`.reference`)."""
