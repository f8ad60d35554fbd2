"""The explicit-level DSL: kernels that name their warps, shared buffers, barriers and
matrix instructions (`lang`), building `argus_core.ir.explicit` IR."""
