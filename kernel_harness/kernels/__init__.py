"""Kernels that are ours (not a library's): each package is a product API of its own."""
