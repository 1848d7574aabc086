"""HSTU pointwise attention: a block-sparse Pallas TPU kernel with a custom VJP, and its family."""
