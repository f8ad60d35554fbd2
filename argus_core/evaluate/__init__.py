"""Evaluation of lowered kernels: launching, correctness in a child process, cost model.

Modules are imported on demand (`argus_core.evaluate.correctness`, `.costmodel`,
`.launch`) so that importing this package never imports Triton or torch.
"""
