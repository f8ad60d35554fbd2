"""Data-flow specifications derived from a PyTorch reference (issue #19).

A `Spec` says, for every element of each output, which input elements it depends on and
how: the index of each read as an expression over the output's coordinates (`o0`, `o1`,
...) and over bound variables, each bound variable contracted (a matmul's k) or reduced
(a row sum's column), all symbolic in the inputs' shapes. `derive.spec_of_graph` computes
it from a torch.fx graph (the front end's capture of a task or of a family's reference);
`synthesis` turns it into ghost assertions on a DSL kernel's IR, which a verifier proves
(`plugins/verifiers/smt/synth` binds it to the `smt` verifier). See docs/invariants.md.
"""

from argus_core.spec.derive import CannotDerive, spec_of_graph, spec_of_module
from argus_core.spec.model import Bound, OutputSpec, Read, Spec, out_sym

__all__ = [
    "Bound",
    "CannotDerive",
    "OutputSpec",
    "Read",
    "Spec",
    "out_sym",
    "spec_of_graph",
    "spec_of_module",
]
