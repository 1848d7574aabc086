"""What the tpu-inference families share, one module a fact:

- :mod:`.loader`: tpu-inference's kernel modules imported without vLLM (exported scripts
  embed it verbatim);
- :mod:`.modules`: a family's kernel modules (:class:`~.modules.KernelModules`) and the
  loader as an exported script's import (:func:`~.modules.loader_source`);
- :mod:`.record`: the ``Family`` record every tpu-inference kernel shares;
- :mod:`.mutants`: the edits of a kernel module's mutant catalog;
- :mod:`.matmul` and :mod:`.ragged`: what the quantized matmuls, and the ragged paged
  attention kernels (rpa v3, its head-dim-64 variant, MLA v2), each share.
"""
