"""Front ends from user programs to the kernels Argus optimizes.

`capture` turns a PyTorch `nn.Module` into a torch.fx graph whose every node carries its
shape and dtype, computed on meta tensors: no full-size tensor is ever made on the host.
A family lowers that graph to DSL kernels (KernelBench's op library:
`argus_plugins.kernels.kernelbench.match`).
"""

from argus_core.frontend.capture import CaptureError, capture, capture_task

__all__ = ["CaptureError", "capture", "capture_task"]
