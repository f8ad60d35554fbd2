"""Front-end lowerings kept apart from `match.py`: each takes the captured graph's ops and
returns an `Emission`, or None when the graph is not the shape it lowers (then `match.match`
tries its own templates). Raising `match.NoTemplate` explains why a graph of this shape
cannot be lowered.

Lowerings here (each a template in `templates/`; docs/kernelbench.md, "Level-1 lowerings"):
  scan       cumsum / cumprod over any dim (a 2-D or 3-D view puts it on a tile axis),
             reversed (`flip`, cumsum, `flip`), exclusive (`narrow`, cumsum, `cat` with
             zeros), after an elementwise prologue (`x * mask`): one program per ROWS lines
             walks them in tiles, carrying the running total (any length)
  rownorm    InstanceNorm, GroupNorm, LayerNorm (and `x / torch.norm(x)`): one program per
             ROWS normalized rows of any length, a loop over tiles per statistic
  lossreduce a whole-tensor loss (MSE, L1, smooth L1, Huber, KL divergence, cross entropy,
             triplet margin, a mean of a chain with a broadcast vector: hinge): one
             program, one loop over (row block, column tile) pairs
  bcast      an elementwise chain whose operands broadcast ([R, 1] columns, [C] rows,
             one-element tensors and number arguments)
  bmm        `torch.bmm`, `einsum` of rows with a matrix or batched, `triu`/`tril` of a
             matmul (the mask in the epilogue)
  sdpa       `F.scaled_dot_product_attention` (online softmax over key blocks)
  softmax_long  a softmax over the last dim of rows longer than LONG_ROW (match's
             `softmax` holds a whole row in one tile): an online max/sum pass over column
             tiles, then a pass that writes
"""

from __future__ import annotations

import math
from typing import Any

from argus_plugins.kernels.kernelbench.match import (
    ELEMENTWISE,
    ENTRY,
    REDUCTIONS,
    ROW_LOWERINGS,
    ROW_OPS,
    Emission,
    NoTemplate,
    Op,
    _assemble,
    _chain,
    _const,
    _elementwise_expr,
    _fill,
    _is_last_dim,
    _is_node,
    _np2,
    _param_binding,
    _shape,
    register,
)


@register
def match_more(
    gm: Any, ops: list[Any], inputs: list[Any], result: Any, task: str, names: list[str]
) -> Any:
    """The Emission for `ops` from this module's lowerings, or None."""
    if not ops or isinstance(result, tuple | list) or not _is_node(result):
        return None
    for lowering in (_scan, _rownorm, _loss, _bcast, _product, _sdpa, _long_softmax, _long_rows):
        em = lowering(gm, ops, inputs, result, task, names)
        if em is not None:
            return em
    return None


# ----------------------------------------------------------------------------- helpers
def _fname(node: Any) -> str:
    """The name of what an fx node calls: a function's or method's name, a layer's class."""
    if not _is_node(node):
        return ""
    if node.op == "call_function":
        return str(getattr(node.target, "__name__", node.target))
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        return type(node.graph.owning_module.get_submodule(node.target)).__name__
    return node.op


def _arg(node: Any, i: int, name: str, default: Any = None) -> Any:
    """Argument `i` of an fx node by position, else by keyword `name`."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _dim(d: Any, rank: int) -> int | None:
    if isinstance(d, list | tuple) and len(d) == 1:
        d = d[0]
    return d % rank if isinstance(d, int) and rank else None


def _tiles(n: int, choices: tuple[int, ...] = (128, 64, 256, 32, 16)) -> list[int]:
    """Tile sizes for a dim of extent n: the choices up to the next power of two."""
    return [t for t in choices if t <= _np2(n)] or [16]


# ----------------------------------------------------------------------------- scans
def _scan(gm, ops, inputs, result, task, names) -> Emission | None:
    """cumsum / cumprod of an elementwise chain of same-shaped inputs over the last dim;
    `flip(d)` around a cumsum (a reverse scan) and `cat(zeros, cumsum(narrow(x, d, 0,
    N - 1)))` (an exclusive scan) are recognised as such."""
    scans = [o for o in ops if _fname(o.node) in ("cumsum", "cumprod")]
    if len(scans) != 1:
        return None
    sop = scans[0]
    kind = _fname(sop.node)
    x = sop.node.args[0]
    full = _shape(x)
    rank = len(full)
    d = _dim(_arg(sop.node, 1, "dim"), rank)
    if d is None:
        raise NoTemplate(f"{kind} needs one int dim, got {_arg(sop.node, 1, 'dim')!r}")
    machinery = {sop.node}
    mode = "inclusive"
    out_node = sop.node
    if _fname(x) == "narrow":  # exclusive: cat(zeros, cumsum(x.narrow(d, 0, N - 1)), d)
        src = x.args[0]
        ok = (
            _dim(_arg(x, 1, "dim"), rank) == d
            and _arg(x, 2, "start") == 0
            and len(_shape(src)) == rank
            and full[d] == _shape(src)[d] - 1
        )
        users = list(sop.node.users)
        cat = users[0] if len(users) == 1 else None
        if not ok or kind != "cumsum" or cat is None or _fname(cat) != "cat":
            raise NoTemplate("a narrowed cumsum is lowered only as an exclusive scan (cat)")
        parts = _arg(cat, 0, "tensors")
        if (
            _dim(_arg(cat, 1, "dim", 0), rank) != d
            or len(parts) != 2
            or parts[1] is not sop.node
            or _fname(parts[0]) not in ("zeros_like", "zeros")
            or _shape(parts[0])[d] != 1
        ):
            raise NoTemplate("an exclusive scan is cat((zeros of one slice, cumsum), dim)")
        machinery |= {x, cat}
        machinery |= _ancestors_of(parts[0], inputs)
        machinery |= {n for n in _ancestors_of(x, inputs) if n.meta.get("tensor_meta") is None}
        x, full, mode, out_node = src, _shape(src), "exclusive", cat
    elif _fname(x) == "flip":
        fl = [_dim(v, rank) for v in _flat_dims(x)]
        users = list(sop.node.users)
        back = users[0] if len(users) == 1 else None
        if (
            kind != "cumsum"
            or fl != [d]
            or back is None
            or _fname(back) != "flip"
            or [_dim(v, rank) for v in _flat_dims(back)] != [d]
        ):
            raise NoTemplate("a flipped scan is lowered as flip(d), cumsum(d), flip(d)")
        machinery |= {x, back}
        x, mode, out_node = x.args[0], "reverse", back
    # the scanned dim as an axis of a 2-D or 3-D view (no copy): the last dim of [M, N]
    # rows ("2d"), the first of [L, rest] ("rows:K"), the middle of [A, L, B] ("mid:D")
    # the scanned dim as an axis of a 2-D or 3-D view (no copy): the last dim of [M, N]
    # rows ("2d"), the first of [N, rest] ("rows:K"), the middle of [A, N, B] ("mid:D");
    # tiles are read through a permuted view so the scan runs along their last axis
    if d == rank - 1:
        form = dict(dims='"M", "N"', view="2d", ax=1, carry="(ROWS,)", ex="[:, None]",
                    pids="(pm,) = al.program_ids((al.cdiv(y.shape[0], ROWS),))",
                    idx="_, col = al.indices((ROWS, BN))", tile="{n}.tile(ROWS, BN)[pm, cc]")  # fmt: skip
    elif d == 0:
        form = dict(dims='"N", "M"', view=f"rows:{rank - 1}", ax=1, carry="(ROWS,)", ex="[:, None]",
                    pids="(pm,) = al.program_ids((al.cdiv(y.shape[1], ROWS),))",
                    idx="_, col = al.indices((ROWS, BN))",
                    tile="al.permute({n}.tile(BN, ROWS)[cc, pm], (1, 0))")  # fmt: skip
    else:
        form = dict(dims='"A", "N", "B"', view=f"mid:{d}", ax=2, carry="(1, ROWS)", ex="[:, :, None]",
                    pids="pa, pm = al.program_ids((y.shape[0], al.cdiv(y.shape[2], ROWS)))",
                    idx="_, _, col = al.indices((1, ROWS, BN))",
                    tile="al.permute({n}.tile(1, BN, ROWS)[pa, cc, pm], (0, 2, 1))")  # fmt: skip
    ax, ex = form["ax"], form["ex"]
    ylen = "y.shape[0]" if d == 0 else "y.shape[1]"
    pro = [o for o in ops if o.node in _ancestors_of(x, inputs) and o.node not in machinery]
    after = _descendants(out_node, ops)
    epi = [o for o in ops if o.node in after]
    rest = [o for o in ops if o.node not in machinery and o not in pro and o not in epi]
    if rest:
        raise NoTemplate(f"ops outside the scan's prologue and epilogue: {[o.kind for o in rest]}")
    for o in pro + epi:
        if o.kind not in ELEMENTWISE:
            raise NoTemplate(f"{o.kind} around a scan: only elementwise ops fuse with it")
    if result is not (epi[-1].node if epi else out_node):
        raise NoTemplate("the forward's result is not the scan's")
    params: list[str] = []
    binding: dict[str, dict[str, Any]] = {}
    loads: list[str] = []
    env: dict[Any, str] = {}

    def operand(node: Any) -> str:
        if node in env:
            return env[node]
        if node not in inputs:
            raise NoTemplate(f"operand {node} of a scan is not a forward input or a constant")
        if _shape(node) != full:
            raise NoTemplate(f"operand {node} of shape {_shape(node)} is not the scan's {full}")
        name = f"x{len(params)}"
        params.append(f"{name}: al.Tensor[{form['dims']}]")
        binding[name] = {"from": "input", "index": inputs.index(node), "view": form["view"]}
        loads.append(f"        {name}_t = al.load({form['tile'].format(n=name)}).to(al.f32)\n")
        env[node] = f"{name}_t"
        return env[node]

    pro_lines = _chain(pro, env, operand)
    value = env[x] if x in env else operand(x)
    neutral = "1.0" if kind == "cumprod" else "0.0"
    body = loads + ["    " + ln for ln in pro_lines]
    body.append(f"        t = al.where(live, {value}, {neutral})\n")
    if kind == "cumprod":
        # product = sign * exp(sum of log|t|), zero once a zero was seen; the sign flips with
        # each negative factor: three running sums carried across tiles
        init = [
            f"    {v} = al.zeros({form['carry']}, al.f32)\n" for v in ("carry", "zeros", "negs")
        ]
        body += [
            "        a = al.abs(t)\n",
            "        nz = al.where(a.eq(0.0), 1.0, 0.0)\n",
            "        ng = al.where(t < 0.0, 1.0, 0.0)\n",
            "        lg = al.log(al.where(a.eq(0.0), 1.0, a))\n",
            f"        nzs = al.cumsum(nz, {ax}) + zeros{ex}\n",
            f"        ngs = al.cumsum(ng, {ax}) + negs{ex}\n",
            "        sign = 1.0 - 2.0 * (ngs % 2.0)\n",
            f"        s = al.where(nzs > 0.0, 0.0, sign * al.exp(al.cumsum(lg, {ax}) + carry{ex}))\n",
            f"        carry = carry + al.sum(lg, {ax})\n",
            f"        zeros = zeros + al.sum(nz, {ax})\n",
            f"        negs = negs + al.sum(ng, {ax})\n",
        ]
        carry_what = (
            "log-magnitude, zero count and negative count (cumprod = sign * exp(sum log|x|))"
        )
    else:
        init = [f"    carry = al.zeros({form['carry']}, al.f32)\n"]
        cs = f"al.cumsum(t, {ax})"
        expr = {
            "inclusive": f"{cs} + carry{ex}",
            "exclusive": f"{cs} - t + carry{ex}",
            "reverse": f"carry{ex} + al.sum(t, {ax}){ex} - {cs} + t",
        }[mode]
        body += [f"        s = {expr}\n", f"        carry = carry + al.sum(t, {ax})\n"]
        carry_what = "sum"
    env[out_node] = "s"
    epi_lines = _chain(epi, env, operand)
    body += ["    " + ln for ln in epi_lines]
    body.append(f"        out = {env[result]}\n")
    binding["y"] = {"from": "output", "view": form["view"]}
    nd = 3 if form["dims"].count(",") == 2 else 2
    reqs = [f"    al.requires({p.split(':')[0]}.shape[{i}].eq(y.shape[{i}]))\n"
            for p in params for i in range(nd)]  # fmt: skip
    mode_text = {"inclusive": f"Inclusive {kind}", "exclusive": "Exclusive cumsum (each "
                 "element's sum of the ones before it)", "reverse": "Reverse cumsum (each "
                 "element's sum of itself and the ones after it; tiles walked last to first)"}[mode]  # fmt: skip
    source = _fill(
        "scan", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, MODE=mode_text,
        CARRY=carry_what, PARAMS=", ".join(params), REQUIRES="".join(reqs),
        INIT="".join(init), TILE="ntiles - 1 - c" if mode == "reverse" else "c",
        BODY="".join(body), DIMS=form["dims"], PIDS=form["pids"], IDX=form["idx"],
        LEN=ylen, YTILE=form["tile"].format(n="y"), AXIS=["first", "middle", "last"][
            2 if d == rank - 1 else 0 if d == 0 else 1],
    )  # fmt: skip
    n = full[d]
    rows = math.prod(full) // n
    tiles = {"ROWS": [16, 4, 8, 2, 1], "BN": _tiles(n, (128, 256, 64, 512, 32, 16))}
    return Emission("scan", source, ENTRY, tiles, binding, {"M": rows, "N": n}, names)


# ----------------------------------------------------------------------------- row norms
NORM_LAYERS = ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "GroupNorm", "LayerNorm")


def _rownorm(gm, ops, inputs, result, task, names) -> Emission | None:
    """InstanceNorm / GroupNorm / LayerNorm of a forward input (each sample's statistics,
    as these layers compute them in eval too), or `x / torch.norm(x)` (the Frobenius norm
    of the whole tensor), then an elementwise epilogue of constants."""
    first = ops[0]
    layer = _fname(first.node)
    frob = (
        first.kind == "norm"
        and first.dim is None
        and len(ops) >= 2
        and ops[1].kind == "div"
        and ops[1].args == [first.args[0], first.node]
    )
    if layer not in NORM_LAYERS and not frob:
        return None
    x_node = first.args[0]
    xs = _shape(x_node)
    if x_node not in inputs:
        return None  # a norm of a computed tensor: another template's (a program's segment)
    core = ops[1] if frob else first
    epi = ops[2:] if frob else ops[1:]
    mod = first.module
    binding: dict[str, dict[str, Any]] = {"x": {"from": "input", "index": inputs.index(x_node)}}
    vec_params: list[str] = []
    reqs: list[str] = []
    eps = 0.0
    grouped = layer.startswith("InstanceNorm") or layer == "GroupNorm"
    g = cg = 1
    affine = False
    if frob:
        p = first.params.get("p", "fro")
        if p not in ("fro", 2, 2.0, None):
            raise NoTemplate(f"x / norm(x, p={p!r}); valid: 'fro', 2")
        binding["x"]["view"] = f"rows:{len(xs)}"
        what = "x / ||x||_F, the Frobenius norm of the whole tensor (one row)."
        rows_text = "[1, numel]"
    elif grouped:
        if layer == "GroupNorm":
            g, c = int(mod.num_groups), int(mod.num_channels)
            if len(xs) < 2 or xs[1] != c or c % g:
                raise NoTemplate(f"GroupNorm of {c} channels in {g} groups, input {list(xs)}")
            affine = bool(mod.affine)
        else:
            k = int(layer[-2])
            if len(xs) != k + 2:
                raise NoTemplate(f"{layer} of a {len(xs)}-D input: only batched [N, C, *S]")
            if mod.track_running_stats:
                raise NoTemplate(f"{layer} with track_running_stats (eval: running statistics)")
            g, c = xs[1], xs[1]
            affine = bool(mod.affine)
        cg = c // g
        eps = float(mod.eps)
        binding["x"]["view"] = f"gns:{g}"
        what = (f"{layer}: {g} groups of {cg} channel(s), each sample's group normalized over "
                "its channels and positions.")  # fmt: skip
        rows_text = "[G, C/G, N, S], a strided view: a program owns ROWS samples of one group"
        if affine:
            for nm in ("weight", "bias"):
                binding[nm[0]] = {"from": "param", "attr": f"{first.attr}.{nm}", "view": "1d"}
                vec_params.append(f' {nm[0]}: al.Tensor["C"],')
            reqs.append(f"    al.requires(w.shape[0].eq({c}))\n")
            reqs.append(f"    al.requires(b.shape[0].eq({c}))\n")
        reqs.append(f"    al.requires(x.shape[0].eq({g}))\n")
        reqs.append(f"    al.requires(x.shape[1].eq({cg}))\n")
    else:  # LayerNorm
        shape = tuple(mod.normalized_shape)
        k = len(shape)
        if tuple(xs[-k:]) != shape:
            raise NoTemplate(f"LayerNorm over {list(shape)} of an input {list(xs)}")
        eps = float(mod.eps)
        binding["x"]["view"] = f"rows:{k}"
        what = f"LayerNorm over the last {k} dims {list(shape)}."
        rows_text = "[rows, prod(normalized_shape)]"
        for nm in ("weight", "bias"):
            if getattr(mod, nm, None) is not None:
                binding[nm[0]] = {"from": "param", "attr": f"{first.attr}.{nm}", "view": "1d"}
                vec_params.append(f' {nm[0]}: al.Tensor["L"],')
                reqs.append(f"    al.requires({nm[0]}.shape[0].eq(x.shape[1]))\n")
    binding["y"] = {"from": "output", "view": binding["x"]["view"]}
    if grouped:
        dims, pids = (
            '"G", "CG", "N", "S"',
            "pg, pr = al.program_ids((x.shape[0], al.cdiv(x.shape[2], ROWS)))",
        )
        rlen = "x.shape[3]"
        count = f"({cg} * x.shape[3])"
        reqs += [f"    al.requires(x.shape[{i}].eq(y.shape[{i}]))\n" for i in range(4)]
    else:
        dims, pids = '"R", "L"', "(pr,) = al.program_ids((al.cdiv(x.shape[0], ROWS),))"
        rlen, count = "x.shape[1]", "x.shape[1]"
        reqs += [f"    al.requires(x.shape[{i}].eq(y.shape[{i}]))\n" for i in range(2)]

    def nest(j: int, body: list[str]) -> list[str]:
        """One flat loop over (channel of the group,) column tile `c{j}` (the DSL carries
        values through one loop level)."""
        if cg > 1:
            head = [f"    for k{j} in al.range({cg} * ntiles):\n",
                    f"        cc{j} = k{j} // ntiles\n", f"        c{j} = k{j} % ntiles\n"]  # fmt: skip
        elif grouped:
            head = [f"    for c{j} in al.range(ntiles):\n", f"        cc{j} = 0\n"]
        else:
            head = [f"    for c{j} in al.range(ntiles):\n"]
        return head + ["    " + ln for ln in body]

    def tile(j: int, t: str = "x") -> str:
        if grouped:
            return f"{t}[pg].tile(1, ROWS, BL)[cc{j}, pr, c{j}]"
        return f"{t}.tile(ROWS, BL)[pr, c{j}]"

    def total(v: str) -> str:  # a tile's per-row sums, [ROWS]
        return f"al.sum(al.sum({v}, 2), 0)" if grouped else f"al.sum({v}, 1)"

    bc = "[None, :][:, :, None]" if grouped else "[:, None]"  # a [ROWS] statistic over a tile
    loops = ["    s1 = al.zeros((ROWS,), al.f32)\n"]
    load1 = f"    t1 = al.load({tile(1)}).to(al.f32)  # elements outside x read 0\n"
    if frob:
        loops += nest(1, [load1, f"    s1 = s1 + {total('t1 * t1')}\n"])
        loops.append("    norm = al.sqrt(s1)\n")
        value, stats = f"t / norm{bc}", "the sum of squares"
    else:
        loops += nest(1, [load1, f"    s1 = s1 + {total('t1')}\n"])
        loops += [f"    mean = s1 / {count}\n", "    s2 = al.zeros((ROWS,), al.f32)\n"]
        loops += nest(2, [
            f"    live = c2 * BL + col < {rlen}\n",
            f"    t2 = al.load({tile(2)}).to(al.f32)\n",
            f"    d = al.where(live, t2 - mean{bc}, 0.0)\n",
            f"    s2 = s2 + {total('d * d')}\n",
        ])  # fmt: skip
        loops.append(f"    rstd = 1.0 / al.sqrt(s2 / {count} + {eps!r})\n")
        value = f"(t - mean{bc}) * rstd{bc}"
        stats = "the mean, then the biased variance around it: two passes, for accuracy"
        if grouped and affine:
            value += " * w_s + b_s"
        elif not grouped:
            value += " * w_t" if "w" in binding else ""
            value += " + b_t" if "b" in binding else ""
    write: list[str] = []
    if grouped and affine:  # the channel's weight and bias: scalars (one channel per step)
        write += [f"    {n}_s = al.load_scalar({n}, pg * {cg} + cc3)\n" for n in "wb"]
    elif not grouped:
        write += [f"    {n}_t = al.load({n}.tile(BL)[c3]).to(al.f32)[None, :]\n"
                  for n in "wb" if n in binding]  # fmt: skip
    write.append(f"    t = al.load({tile(3)}).to(al.f32)\n")
    write.append(f"    v = {value}\n")
    env: dict[Any, str] = {core.node: "v"}

    def operand(node: Any) -> str:
        raise NoTemplate(f"operand {node} after a norm is not a constant")

    write += _chain(epi, env, operand)
    if result not in env:
        raise NoTemplate("the forward's result is not the norm's")
    write.append(f"    out = {env[result]}\n")
    write.append(f"    al.store({tile(3, 'y')}, out.to(y.dtype))\n")
    loops += nest(3, write)
    col = "_, _, col = al.indices((1, ROWS, BL))" if grouped else "_, col = al.indices((ROWS, BL))"
    source = _fill(
        "rownorm", TASK=task, WHAT=" -> ".join(names), WHAT_NORM=what, ROWS=rows_text,
        STATS=stats, ENTRY=ENTRY, VEC_PARAMS="".join(vec_params), REQUIRES="".join(reqs),
        DIMS=dims, PIDS=pids, COL=col, RLEN=rlen, LOOPS="".join(loops).rstrip("\n"),
    )  # fmt: skip
    if frob:
        r, length = 1, math.prod(xs)
    elif grouped:
        r, length = xs[0] * g, math.prod(xs[2:]) * cg
    else:
        k = len(mod.normalized_shape)
        r, length = math.prod(xs[: len(xs) - k]), math.prod(xs[len(xs) - k :])
    per = length // cg
    nr = xs[0] if grouped else r  # the rows a program's ROWS are taken from
    tiles = {"ROWS": [r_ for r_ in (16, 8, 4, 2, 1) if r_ <= _np2(nr, 1)],
             "BL": _tiles(per, (1024, 256, 512, 2048, 128, 64, 32, 16))}  # fmt: skip
    split: dict[str, Any] = {}
    if frob:
        tiles["ROWS"] = [1]
        # split over programs (`match.split_reduction`): the sum of squares as partial sums,
        # then the elementwise division over x's [rows, last dim] view
        env2: dict[Any, str] = {core.node: "v"}
        epi_lines = _chain(epi, env2, operand)
        split = {"frob": True, "x": {**binding["x"], "view": "2d"},
                 "epilogue": "".join(epi_lines) + f"    out = {env2[result]}\n",
                 "rows": math.prod(xs[:-1]), "cols": xs[-1]}  # fmt: skip
    return Emission("rownorm", source, ENTRY, tiles, binding, {"M": r, "N": length}, names,
                    split=split)  # fmt: skip


# ----------------------------------------------------------------------------- losses
# loss layers and functions -> their name here (each with the parameters PyTorch gives it)
LOSS_MODULES = {"MSELoss": "mse_loss", "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss",
                "HuberLoss": "huber_loss", "KLDivLoss": "kl_div",
                "CrossEntropyLoss": "cross_entropy", "TripletMarginLoss": "triplet_margin_loss"}  # fmt: skip
LOSS_FUNCTIONS = set(LOSS_MODULES.values())


def _loss_params(node: Any, name: str) -> dict[str, Any]:
    """A loss's parameters from its layer's attributes or its call's keywords."""
    defaults = {"reduction": "mean", "beta": 1.0, "delta": 1.0, "log_target": False,
                "margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False, "ignore_index": -100,
                "label_smoothing": 0.0, "weight": None}  # fmt: skip
    if node.op == "call_module":
        mod = node.graph.owning_module.get_submodule(node.target)
        return {k: getattr(mod, k, d) for k, d in defaults.items()}
    return {k: node.kwargs.get(k, d) for k, d in defaults.items()}


def _loss(gm, ops, inputs, result, task, names) -> Emission | None:
    """A whole-tensor loss of forward inputs (after an elementwise prologue): MSE, L1, smooth
    L1, Huber, KL divergence, cross entropy (class indices), triplet margin, or a mean/sum
    over every element of an elementwise chain whose operands broadcast ([C] vectors: a
    hinge loss `mean(clamp(1 - pred * target, min=0))`)."""
    last = ops[-1]
    if last.node is not result:
        return None
    name = _fname(last.node)
    name = LOSS_MODULES.get(name, name)
    whole = last.kind in ("sum", "mean") and last.dim is None and not last.keepdim
    if name not in LOSS_FUNCTIONS and not whole:
        return None
    chain = ops[:-1]
    if any(o.kind not in ELEMENTWISE for o in chain):
        if whole:
            return None  # a whole-tensor reduction of something else: not a loss here
        raise NoTemplate(f"ops before a loss must be elementwise: {[o.kind for o in chain]}")
    args = [a for a in last.node.args if _is_node(a)]
    if whole:
        args = [last.args[0]]
        used = {a for o in ops for a in o.args if _is_node(a) and a in inputs}
        if used and len({_shape(a) for a in used}) == 1:
            return None  # same-shaped operands: `match`'s fullreduce template
    full = max((_shape(a) for a in args), key=len)
    if name == "cross_entropy" and len(full) != 2:
        raise NoTemplate(f"cross_entropy of {list(full)} logits: only [N, C]")
    if not full:
        raise NoTemplate("a loss of 0-d tensors")
    n_cols = full[-1]
    params: list[str] = []
    binding: dict[str, dict[str, Any]] = {}
    loads: list[str] = []
    env: dict[Any, str] = {}
    x0: list[str] = []

    def operand(node: Any) -> str:
        c = _const(node)
        if c is not None:
            return c
        if node in env:
            return env[node]
        if node not in inputs:
            raise NoTemplate(f"operand {node} of a loss is not a forward input or a constant")
        sh = _shape(node)
        nm = f"x{len(params)}"
        if sh == full:
            params.append(f'{nm}: al.Tensor["R", "C"]')
            binding[nm] = {"from": "input", "index": inputs.index(node), "view": "2d"}
            loads.append(f"        {nm}_t = al.load({nm}.tile(ROWS, BC)[r, c]).to(al.f32)\n")
            x0.append(nm)
        elif sh in ((n_cols,), (1, n_cols)) or (len(sh) == len(full) and math.prod(sh) == n_cols
                                                 and sh[-1] == n_cols):  # fmt: skip
            nm = f"vec{len(params)}"
            params.append(f'{nm}: al.Tensor["C"]')
            binding[nm] = {"from": "input", "index": inputs.index(node), "view": "1d"}
            loads.append(f"        {nm}_t = al.load({nm}.tile(BC)[c]).to(al.f32)[None, :]\n")
        else:
            raise NoTemplate(f"loss operand {node} of shape {list(sh)} neither {list(full)} "
                             f"nor a [{n_cols}] vector")  # fmt: skip
        env[node] = f"{nm}_t"
        return env[node]

    lines = ["    " + ln for ln in _chain(chain, env, operand)]
    p = _loss_params(last.node, name)
    red = "mean" if whole and last.kind == "mean" else "sum" if whole else p["reduction"]
    if red not in ("mean", "sum", "batchmean"):
        raise NoTemplate(f"{name} reduction={red!r}; valid: 'mean', 'sum' (and 'batchmean')")
    init: list[str] = []
    reqs_ce: list[str] = []
    rowwise = name in ("cross_entropy", "triplet_margin_loss")
    if name == "cross_entropy":
        how = "each row block's losses are summed into a running total."
    elif rowwise:
        how = "per-row statistics are carried across a row block's column tiles and the row's loss is added at its last tile."
    else:
        how = "each tile's elementwise loss is summed into a running total."
    vals = [operand(a) for a in (args[:1] if name == "cross_entropy" else args)]
    if whole:
        e = vals[0]
        what = f"The {last.kind} of an elementwise chain over every element."
    elif name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        pv, tv = vals
        lines.append(f"        dd = {pv} - {tv}\n")
        lines.append("        ad = al.abs(dd)\n")
        beta = float(p["beta"] if name == "smooth_l1_loss" else p["delta"])
        e = {"mse_loss": "dd * dd", "l1_loss": "ad",
             "smooth_l1_loss": f"al.where(ad < {beta!r}, 0.5 * dd * dd / {beta!r}, ad - {0.5 * beta!r})"
             if beta > 0 else "ad",
             "huber_loss": f"al.where(ad < {beta!r}, 0.5 * dd * dd, {beta!r} * (ad - {0.5 * beta!r}))"}[name]  # fmt: skip
        what = f"{name} (reduction {red!r}" + (
            f", beta {beta!r})." if "l1" in name or "huber" in name else ")."
        )
    elif name == "kl_div":
        iv, tv = vals
        if p["log_target"]:
            e = f"al.exp({tv}) * ({tv} - {iv})"
        else:  # target * (log target - input), 0 where the target is 0 (xlogy)
            e = f"al.where({tv} > 0.0, {tv} * (al.log(al.where({tv} > 0.0, {tv}, 1.0)) - {iv}), 0.0)"
        what = f"kl_div(input, target, reduction={red!r}, log_target={bool(p['log_target'])})."
    elif name == "cross_entropy":
        if p["weight"] is not None or float(p["label_smoothing"]) != 0.0:
            raise NoTemplate("cross_entropy with class weights or label smoothing")
        tnode = args[1]
        if _shape(tnode) != full[:1]:
            raise NoTemplate(f"cross_entropy targets {list(_shape(tnode))}: class indices [N] only")
        xv = vals[0]
        tg = f"tg{len(params)}"
        params.append(f'{tg}: al.Tensor["R"]')
        binding[tg] = {"from": "input", "index": inputs.index(tnode), "view": "1d"}
        ig = int(p["ignore_index"])
        init += ["    cnt = al.zeros((1,), al.f32)\n"]
        reqs_ce = [
            f"    al.requires({vals[0][:-2]}.shape[1] <= BC)  # one tile spans a row of logits\n"
        ]
        lines += [
            f"        tgt = al.load({tg}.tile(ROWS)[r], other={ig})\n",
            f'        xm = al.where(live, {xv}, float("-inf"))\n',
            "        m = al.max(xm, 1)\n",
            "        se = al.sum(al.where(live, al.exp(xm - m[:, None]), 0.0), 1)\n",
            "        hit = tgt[:, None].eq(col)\n",
            f"        pk = al.sum(al.where(hit, {xv}, 0.0), 1)\n",
            f"        skip = tgt.eq({ig})  # rows whose target is ignore_index\n",
            "        total = total + al.sum(al.where(skip, 0.0, al.where(rlive, m + al.log(se) - pk, 0.0)), 0)\n",
            "        cnt = cnt + al.sum(al.where(skip, 0.0, al.where(rlive, al.full((ROWS,), 1.0), 0.0)), 0)\n",
        ]
        what = ("cross_entropy of [N, C] logits and class indices: each row's logsumexp (its "
                "maximum first, for range) minus its target's logit, averaged over the rows whose "
                f"target is not ignore_index {ig}; one column tile spans a row (BC >= C).")  # fmt: skip
        e = None
    else:  # triplet_margin_loss
        if float(p["p"]) != 2.0 or p["swap"]:
            raise NoTemplate(
                f"triplet_margin_loss p={p['p']!r} swap={p['swap']!r}; valid: p=2, swap=False"
            )
        av, pv, nv = vals
        eps, margin = float(p["eps"]), float(p["margin"])
        init += ["    sap = al.zeros((ROWS,), al.f32)\n", "    san = al.zeros((ROWS,), al.f32)\n"]
        lines += [  # pairwise_distance: ||a - b + eps||_2 over the live columns
            f"        dp = al.where(live, {av} - {pv} + {eps!r}, 0.0)\n",
            f"        dn = al.where(live, {av} - {nv} + {eps!r}, 0.0)\n",
            "        sap = al.where(c > 0, sap, 0.0) + al.sum(dp * dp, 1)\n",
            "        san = al.where(c > 0, san, 0.0) + al.sum(dn * dn, 1)\n",
            f"        rl = al.maximum(al.sqrt(sap) - al.sqrt(san) + {margin!r}, 0.0)\n",
            "        total = total + al.sum(al.where(rlive & (c.eq(nct - 1)), rl, 0.0), 0)\n",
        ]
        what = (f"TripletMarginLoss (margin {margin!r}, p=2, eps {eps!r}): each row's "
                "max(d(a, p) - d(a, n) + margin, 0), averaged over the rows.")  # fmt: skip
        e = None
    if e is not None:
        lines += [f"        part = al.sum(al.where(live, {e}, 0.0), 1)\n",
                  "        total = total + al.sum(al.where(rlive, part, 0.0), 0)\n"]  # fmt: skip
    if not x0:
        raise NoTemplate("a loss needs one forward input of the full shape")
    a = x0[0]
    if name == "cross_entropy":
        scale = " / cnt" if red == "mean" else ""
    elif red == "batchmean":
        inner = math.prod(full[1:-1])  # batchmean divides by the batch: rows / inner dims
        scale = f" / {a}.shape[0]" if inner == 1 else f" / ({a}.shape[0] // {inner})"
    elif red == "mean":
        scale = f" / {a}.shape[0]" if rowwise else f" / ({a}.shape[0] * {a}.shape[1])"
    else:
        scale = ""
    reqs = [f"    al.requires({q.split(':')[0]}.shape[1].eq({a}.shape[1]))\n" for q in params[1:]
            if q.split(":")[0].startswith("x")]  # fmt: skip
    reqs += reqs_ce
    binding["y"] = {"from": "output", "view": "1d"}
    source = _fill(
        "lossreduce", TASK=task, WHAT=" -> ".join(names), WHAT_LOSS=what, HOW=how,
        ENTRY=ENTRY, PARAMS=", ".join(params), REQUIRES="".join(reqs), X0=a,
        INIT="".join(init), BODY="".join(loads + lines), SCALE=scale,
    )  # fmt: skip
    rows = math.prod(full[:-1])
    bc = _tiles(n_cols, (128, 256, 64, 512, 32, 16))
    if name == "cross_entropy":
        bc = [_np2(n_cols)]
    tiles = {"ROWS": [16, 8, 4, 2, 1], "BC": bc}
    # split over programs (`match.split_reduction`): a linear scale (a mean's, batchmean's)
    # rides on each partial sum; a cross entropy's mean divides by the rows not ignored,
    # which the last kernel counts
    split: dict[str, Any] = {"source": source, "count": None}
    if name == "cross_entropy" and red == "mean":
        split["source"] = _fill(
            "lossreduce", TASK=task, WHAT=" -> ".join(names), WHAT_LOSS=what, HOW=how,
            ENTRY=ENTRY, PARAMS=", ".join(params), REQUIRES="".join(reqs), X0=a,
            INIT="".join(init), BODY="".join(loads + lines), SCALE="",
        )  # fmt: skip
        split["count"] = {"binding": dict(binding[tg]), "ignore": ig}
    return Emission("lossreduce", source, ENTRY, tiles, binding, {"M": rows, "N": n_cols}, names,
                    split=split)  # fmt: skip


# ----------------------------------------------------------------------------- broadcasts
LAYOUT_METHODS = ("unsqueeze", "view", "reshape")  # a new shape of the same elements


def _is_param(node: Any) -> bool:
    """A module's parameter or buffer, read by `get_attr`."""
    return _is_node(node) and node.op == "get_attr"


def _bcast_kind(node: Any, full: tuple[int, ...], k: int) -> str | None:
    """How an operand of shape `node`'s (right-aligned against `full`, numpy's rule) is read
    in the output's [prod(full[:k]), prod(full[k:])] view: "scalar", "tile", "row" (it
    varies only in the dims from k on, as the output does), "col" (only before k), None."""
    if not _is_node(node) or node.meta.get("tensor_meta") is None:
        return "scalar"  # a number argument
    sh = tuple(_shape(node))
    if len(sh) > len(full):
        return None
    sh = (1,) * (len(full) - len(sh)) + sh
    if math.prod(sh) == 1:
        return "scalar"
    if sh == tuple(full):
        return "tile"
    if all(d == 1 for d in sh[:k]) and sh[k:] == tuple(full[k:]):
        return "row"
    if all(d == 1 for d in sh[k:]) and sh[:k] == tuple(full[:k]):
        return "col"
    return None


def _bcast(gm, ops, inputs, result, task, names) -> Emission | None:
    """An elementwise chain whose operands broadcast against the output (`A.unsqueeze(1) *
    B`, `A * s` with a number argument `s`, `x + bias` of a [C] vector): each operand is
    read as a tile, a row, a column or a scalar of the output's [R, C] view."""
    layout = [o for o in ops if _fname(o.node) in LAYOUT_METHODS]
    chain = [o for o in ops if o not in layout]
    if not chain or any(o.kind not in ELEMENTWISE for o in chain):
        return None
    full = _shape(result)
    if not full or result is not chain[-1].node:
        return None
    # a layout op of a forward input is that input seen with another shape
    seen_as: dict[Any, Any] = {}
    for o in layout:
        src = o.node.args[0]
        src = seen_as.get(src, src)
        if src not in inputs and not _is_param(src):
            return None  # a view of a computed tensor: not a broadcast of inputs
        seen_as[o.node] = src
    used = {a for o in chain for a in o.args if _is_node(a)}
    plain = [a for a in used if a in inputs]
    if not layout and all(_shape(a) == full for a in plain):
        return None  # same-shaped operands: `match`'s elementwise template
    # the output seen as [R, C] = [prod(full[:k]), prod(full[k:])]: the last dim alone
    # where every operand fits so, else the split where each is a tile, a row (its dims from
    # k on), a column (its dims before k) or a scalar: `[M, 1] + [1, C, 1, 1]` (level2/75)
    # is an outer sum, R = C of the bias, C = M
    produced = {o.node for o in chain}
    leaves = [a for a in used if a not in produced]
    k = max(len(full) - 1, 0)
    for cut in range(len(full) - 1, 0, -1):
        if all(_bcast_kind(a, full, cut) for a in leaves):
            k = cut
            break
    n_cols = math.prod(full[k:])
    rows = math.prod(full[:k])
    view2d = "2d" if k == len(full) - 1 else f"rows:{len(full) - k}"
    params: list[str] = []
    binding: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    env: dict[Any, str] = {}

    def operand(node: Any) -> str:
        if node in env:
            return env[node]
        src = seen_as.get(node, node)
        if _is_param(src):  # a parameter or buffer of the module (a bias)
            bind: dict[str, Any] = {"from": "param", "attr": str(src.target)}
        elif src in inputs:
            bind = {"from": "input", "index": inputs.index(src)}
        else:
            raise NoTemplate(f"operand {node} is not a forward input, a view of one or a constant")
        j = len(params)
        kind = _bcast_kind(node, full, k)
        if kind == "scalar":  # a number argument or a one-element tensor
            nm = f"s{j}"
            params.append(f'{nm}: al.Tensor["S{j}"]')
            binding[nm] = {**bind, "view": "1d"}
            lines.append(f"    {nm}_t = al.load_scalar({nm}, 0)\n")
        elif kind == "tile":
            nm = f"x{j}"
            params.append(f'{nm}: al.Tensor["R", "C"]')
            binding[nm] = {**bind, "view": view2d}
            lines.append(f"    {nm}_t = al.load({nm}.tile(BR, BC)[pr, pc]).to(al.f32)\n")
        elif kind == "row":  # [C], [1, C], [1, *full[k:]]
            nm = f"row{j}"
            params.append(f'{nm}: al.Tensor["C"]')
            binding[nm] = {**bind, "view": "1d"}
            lines.append(f"    {nm}_t = al.load({nm}.tile(BC)[pc]).to(al.f32)[None, :]\n")
        elif kind == "col":  # [.., R, 1], [*full[:k], 1, ..]: a column
            nm = f"col{j}"
            params.append(f'{nm}: al.Tensor["R"]')
            binding[nm] = {**bind, "view": "1d"}
            lines.append(f"    {nm}_t = al.load({nm}.tile(BR)[pr]).to(al.f32)[:, None]\n")
        else:
            raise NoTemplate(f"operand {node} of shape {list(_shape(node))} does not broadcast to "
                             f"{list(full)} as a tile, a row, a column or a scalar")  # fmt: skip
        env[node] = f"{nm}_t"
        return env[node]

    body = _chain(chain, env, operand)
    lines += body
    lines.append(f"    out = {env[result]}\n")
    binding["y"] = {"from": "output", "view": view2d}
    reqs = []
    for q in params:
        nm = q.split(":")[0]
        if nm.startswith("x"):
            reqs += [f"    al.requires({nm}.shape[0].eq(y.shape[0]))\n",
                     f"    al.requires({nm}.shape[1].eq(y.shape[1]))\n"]  # fmt: skip
        elif nm.startswith("row"):
            reqs.append(f"    al.requires({nm}.shape[0].eq(y.shape[1]))\n")
        elif nm.startswith("col"):
            reqs.append(f"    al.requires({nm}.shape[0].eq(y.shape[0]))\n")
    source = _fill(
        "bcast", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, PARAMS=", ".join(params),
        REQUIRES="".join(reqs), BODY="".join(lines),
    )  # fmt: skip
    tiles = {"BR": [16, 32, 64], "BC": _tiles(n_cols, (32, 64, 128, 16))}
    return Emission("bcast", source, ENTRY, tiles, binding, {"R": rows, "C": n_cols}, names)


# ----------------------------------------------------------------------------- products
def _einsum_kind(eq: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> str | None:
    """ "rows" for `...l,lk->...k` (A's rows times a matrix), "bmm" for `bij,bjk->bik`."""
    eq = eq.replace(" ", "")
    if "->" not in eq or "..." in eq:
        return None
    lhs, out = eq.split("->")
    parts = lhs.split(",")
    if len(parts) != 2:
        return None
    a, b = parts
    if len(a) != len(sa) or len(b) != len(sb) or len(set(a)) != len(a) or len(set(b)) != len(b):
        return None
    if len(b) == 2 and a[-1] == b[0] and out == a[:-1] + b[1] and len(set(a + b)) == len(a) + 1:
        return "rows"
    if (len(a) == len(b) == 3 and a[0] == b[0] and a[2] == b[1] and out == a[:2] + b[2]
            and len(set(a + b)) == 4):  # fmt: skip
        return "bmm"
    return None


def _product(gm, ops, inputs, result, task, names) -> Emission | None:
    """`torch.bmm(A, B)` ([B, M, K] @ [B, K, N]), `einsum` of a tensor's rows with a matrix
    (`bijl,lk->bijk`) or a batched product, and `triu`/`tril` of a product of 2-D inputs,
    then an elementwise epilogue of constants."""
    core = ops[0]
    fn = _fname(core.node)
    mask = None
    if fn == "bmm" or (fn in ("matmul", "mm") and any(
            _fname(o.node) in ("triu", "tril") for o in ops[1:])):  # fmt: skip
        kind = "bmm" if len(_shape(core.node.args[0])) == 3 else "rows"
        a_node, b_node = core.node.args[:2]
    elif fn == "einsum":
        eq = core.node.args[0]
        operands = list(core.node.args[1:])
        if len(operands) == 1 and isinstance(operands[0], list | tuple):
            operands = list(operands[0])
        if not isinstance(eq, str) or len(operands) != 2:
            raise NoTemplate(f"einsum {eq!r} of {len(operands)} operands: only two")
        a_node, b_node = operands
        kind = _einsum_kind(eq, _shape(a_node), _shape(b_node))
        if kind is None:
            raise NoTemplate(f"einsum {eq!r}: only '...l,lk->...k' and 'bij,bjk->bik'")
    else:
        return None
    if a_node not in inputs or b_node not in inputs:
        raise NoTemplate("a batched product of computed tensors: only of forward inputs")
    sa, sb = _shape(a_node), _shape(b_node)
    if kind == "bmm" and (len(sa) != 3 or len(sb) != 3 or sa[0] != sb[0] or sa[2] != sb[1]):
        raise NoTemplate(f"bmm of {list(sa)} and {list(sb)}")
    if kind == "rows" and (len(sb) != 2 or len(sa) < 2 or sa[-1] != sb[0]):
        raise NoTemplate(f"a product of {list(sa)} and {list(sb)}")
    rest = ops[1:]
    env: dict[Any, str] = {core.node: "acc"}
    lines: list[str] = []
    if rest and _fname(rest[0].node) in ("triu", "tril"):
        tri = rest[0]
        d = _arg(tri.node, 1, "diagonal", 0)
        if not isinstance(d, int) or tri.node.args[0] is not core.node:
            raise NoTemplate("triu/tril of the product with an int diagonal")
        mask = (_fname(tri.node), d)
        cmp = ">=" if mask[0] == "triu" else "<="
        lines += ["    ri, cj = al.indices((BM, BN))\n",
                  f"    keep = (pn * BN + cj) - (pm * BM + ri) {cmp} {d}  # {mask[0]}, diagonal {d}\n",
                  "    e_tri = al.where(keep, acc, al.zeros((BM, BN), al.f32))  # 0 off the triangle\n"]  # fmt: skip
        env[tri.node] = "e_tri"
        rest = rest[1:]

    def operand(node: Any) -> str:
        raise NoTemplate(f"epilogue operand {node} of a product is not a constant")

    lines += _chain(rest, env, operand)
    if result not in env:
        raise NoTemplate("the forward's result is not the product's")
    lines.append(f"    out = {env[result]}\n")
    binding: dict[str, dict[str, Any]] = {
        "a": {"from": "input", "index": inputs.index(a_node)},
        "b": {"from": "input", "index": inputs.index(b_node)},
        "c": {"from": "output"},
    }
    if kind == "bmm":
        bsz, m, k = sa
        n = sb[2]
        parts = dict(
            A_DIMS='"B", "M", "K"', B_DIMS='"B", "K", "N"', C_DIMS='"B", "M", "N"',
            PIDS="pb, pm, pn", GRID="(c.shape[0], al.cdiv(c.shape[1], BM), al.cdiv(c.shape[2], BN))",
            K_DIM="a.shape[2]", A_VIEW="a[pb].tile(BM, BK)[pm, k]", B_VIEW="b[pb].tile(BK, BN)[k, pn]",
            C_VIEW="c[pb].tile(BM, BN)[pm, pn]", PER_BATCH=" of one batch",
            WHAT_PRODUCT="C[b] = A[b] @ B[b] for every batch b.",
            REQUIRES="".join(f"    al.requires({e})\n" for e in (
                "a.shape[0].eq(c.shape[0])", "b.shape[0].eq(c.shape[0])", "a.shape[1].eq(c.shape[1])",
                "b.shape[2].eq(c.shape[2])", "a.shape[2].eq(b.shape[1])")),
        )  # fmt: skip
        shape = {"B": bsz, "M": m, "N": n, "K": k}
    else:
        m, k = math.prod(sa[:-1]), sa[-1]
        n = sb[1]
        if len(sa) > 2:
            binding["a"]["view"] = "2d"
            binding["c"]["view"] = "2d"
        parts = dict(
            A_DIMS='"M", "K"', B_DIMS='"K", "N"', C_DIMS='"M", "N"', PIDS="pm, pn",
            GRID="al.cdiv(c.shape, (BM, BN))", K_DIM="a.shape[1]", A_VIEW="a.tile(BM, BK)[pm, k]",
            B_VIEW="b.tile(BK, BN)[k, pn]", C_VIEW="c.tile(BM, BN)[pm, pn]", PER_BATCH="",
            WHAT_PRODUCT="C = A @ B, A's leading dims read as rows ([rows, K] view)."
            if len(sa) > 2 else "C = A @ B.",
            REQUIRES="".join(f"    al.requires({e})\n" for e in (
                "a.shape[0].eq(c.shape[0])", "b.shape[1].eq(c.shape[1])", "a.shape[1].eq(b.shape[0])")),
        )  # fmt: skip
        shape = {"M": m, "N": n, "K": k}
    mask_text = ""
    if mask:
        mask_text = (f" The epilogue keeps the {'upper' if mask[0] == 'triu' else 'lower'} "
                     f"triangle ({mask[0]}, diagonal {mask[1]}) by each element's global row "
                     "and column and writes 0 elsewhere.")  # fmt: skip
    source = _fill(
        "bmm", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, MASK_TEXT=mask_text,
        EPILOGUE="".join(lines), **parts,
    )  # fmt: skip
    tile = lambda d: [t for t in (32, 16, 64) if t <= _np2(d)]  # noqa: E731
    tiles = {"BM": tile(m), "BN": tile(n), "BK": [t for t in (16, 32) if t <= _np2(k)]}
    return Emission("bmm", source, ENTRY, tiles, binding, shape, names)


# ----------------------------------------------------------------------------- attention
def _sdpa(gm, ops, inputs, result, task, names) -> Emission | None:
    """`F.scaled_dot_product_attention(q, k, v)` of [B, H, S, D] forward inputs: no mask,
    no dropout, not causal (those raise NoTemplate), the scale given or 1/sqrt(D)."""
    if len(ops) != 1 or _fname(ops[0].node) != "scaled_dot_product_attention":
        return None
    node = ops[0].node
    q, k, v = (_arg(node, i, nm) for i, nm in enumerate(("query", "key", "value")))
    mask = _arg(node, 3, "attn_mask")
    drop = _arg(node, 4, "dropout_p", 0.0)
    causal = _arg(node, 5, "is_causal", False)
    scale = node.kwargs.get("scale")
    if mask is not None or drop or causal or node.kwargs.get("enable_gqa"):
        raise NoTemplate("scaled_dot_product_attention with a mask, dropout, is_causal or GQA")
    if any(t not in inputs or len(_shape(t)) != 4 for t in (q, k, v)):
        raise NoTemplate("scaled_dot_product_attention of [B, H, S, D] forward inputs only")
    sq, sk, sv = _shape(q), _shape(k), _shape(v)
    if sq[:2] != sk[:2] or sk[:3] != sv[:3] or sq[3] != sk[3]:
        raise NoTemplate(f"scaled_dot_product_attention of {list(sq)}, {list(sk)}, {list(sv)}")
    if scale is None:
        expr, text = "1.0 / al.sqrt(al.full((1, 1), 1.0) * q.shape[3])", "1/sqrt(D), D read from q"
    else:
        expr, text = repr(float(scale)), f"the Model's {float(scale)!r}"
    source = _fill("sdpa", TASK=task, WHAT=" -> ".join(names), ENTRY=ENTRY, SCALE=expr,
                   SCALE_TEXT=text)  # fmt: skip
    binding = {"q": {"from": "input", "index": inputs.index(q)},
               "k": {"from": "input", "index": inputs.index(k)},
               "v": {"from": "input", "index": inputs.index(v)}, "o": {"from": "output"}}  # fmt: skip
    bd = _np2(max(sq[3], sv[3]))
    if bd > SDPA_ONE_TILE_D and _np2(sk[2]) <= SDPA_WIDE_KEYS:
        return _sdpa_wide(task, names, inputs, (q, k, v), (sq, sk, sv), (expr, text))
    tiles = {"BM": [t for t in (16, 32, 64) if t <= _np2(sq[2])] or [16],
             "BN": [t for t in (16, 32, 64) if t <= _np2(sk[2])] or [16], "BD": [bd]}  # fmt: skip
    shape = {"B": sq[0] * sq[1], "M": sq[2], "N": sk[2], "K": sq[3]}
    return Emission("sdpa", source, ENTRY, tiles, binding, shape, names)


# the widest head dim one `sdpa` tile holds: a [BM, BD] query tile and accumulator and the
# [BN, BD] key and value tiles in fp32 at BD 1024 took 329728 bytes of shared memory on
# sm_90 (level1/97: refused at compile, 232448 the most a block has)
SDPA_ONE_TILE_D = 256
SDPA_WIDE_KEYS = 4096  # `sdpa_scores` holds every key of BM rows: [BM, BT] fp32


def _sdpa_wide(task, names, inputs, qkv, shapes, scale) -> Emission:
    """Attention of a head dim past SDPA_ONE_TILE_D as a program: `sdpa_scores` writes
    softmax(Q Kᵀ * scale) to a buffer [B, H, S, T] walking D in steps, `sdpa_pv` multiplies
    it by V (as PyTorch's math path does for such heads)."""
    (q, k, v), (sq, sk, sv), (expr, text) = qkv, shapes, scale
    what = " -> ".join(names)
    scores = _fill("sdpa_scores", TASK=task, WHAT=what, ENTRY=ENTRY, SCALE=expr,
                   SCALE_TEXT=text)  # fmt: skip
    pv = _fill("sdpa_pv", TASK=task, WHAT=what, ENTRY=ENTRY)
    bt = _np2(sk[2])
    # [BM, BT] fp32 scores at 4 warps: at most 8192 elements (64 registers a thread)
    bm = [t for t in (16, 32) if t * bt <= 8192 and t <= _np2(sq[2])] or [16]
    em_s = Emission("sdpa_scores", scores, ENTRY, {"BM": bm, "BT": [bt], "BK": [16, 32]},
                    {}, {"B": sq[0] * sq[1], "M": sq[2], "N": sk[2], "K": sq[3]}, names)  # fmt: skip
    em_pv = Emission("sdpa_pv", pv, ENTRY,
                     {"BM": [t for t in (64, 32, 16) if t <= _np2(sq[2])] or [16],
                      "BN": [t for t in (64, 32, 16) if t <= _np2(sv[3])] or [16],
                      "BK": [32, 16]}, {},
                     {"B": sq[0] * sq[1], "M": sq[2], "N": sv[3], "K": sk[2]}, names)  # fmt: skip
    qi, ki, vi = (inputs.index(t) for t in (q, k, v))
    b_s = {"q": {"from": "input", "index": qi}, "k": {"from": "input", "index": ki},
           "p": {"from": "buffer", "name": "t0"}}  # fmt: skip
    b_pv = {"p": {"from": "buffer", "name": "t0"}, "v": {"from": "input", "index": vi},
            "o": {"from": "output"}}  # fmt: skip
    # the weights' extents follow each call's Q and K: [B, H, S, T]
    buffers = {"t0": [f"s[{qi}][0]", f"s[{qi}][1]", f"s[{qi}][2]", f"s[{ki}][2]"]}
    kernels = [(em_s, b_s, "buffer t0 (the attention weights)"), (em_pv, b_pv, "the output")]
    return _assemble(task, names, kernels, buffers)


# ----------------------------------------------------------------------------- long rows
LONG_ROW = 16384  # rows longer than this are walked in column tiles (a whole-row tile spills)


def _long_softmax(gm, ops, inputs, result, task, names) -> Emission | None:
    """A lone softmax over the last dim of a forward input whose rows are longer than
    LONG_ROW: `softmax_long` (match's `softmax` holds ROWS whole rows in one tile, past
    Triton's 2^20 elements at level1/23's 393216 columns)."""
    if len(ops) != 1 or ops[0].kind != "softmax" or result is not ops[0].node:
        return None
    x = ops[0].args[0] if ops[0].args else None
    shape = _shape(x) if _is_node(x) else ()
    if x not in inputs or not shape or _dim(ops[0].dim, len(shape)) != len(shape) - 1:
        return None
    n = shape[-1]
    if _np2(n) <= LONG_ROW:
        return None
    source = _fill("softmax_long", TASK=task, WHAT="softmax(x, dim=-1), long rows", ENTRY=ENTRY)
    binding = {
        "x": {"from": "input", "index": inputs.index(x), "view": "2d"},
        "y": {"from": "output", "view": "2d"},
    }
    tiles = {"ROWS": [1, 2, 4], "BN": [4096, 2048, 8192]}
    return Emission("softmax_long", source, ENTRY, tiles, binding,
                    {"M": math.prod(shape[:-1]), "N": n}, names)  # fmt: skip


def _long_rows(gm, ops, inputs, result, task, names) -> Emission | None:
    """A row program's ops (elementwise, reductions over the last dim, softmax, log_softmax,
    logsumexp, p-norms) over rows longer than LONG_ROW: `rowlong`. A reduction is known
    after the pass that folds it in; its pass is one more than the latest of the reductions
    its operand reads (softmax's max and sum are one pass, kept online); a row-shaped result
    is stored after the last pass, a full one by a last pass over the columns."""
    kinds = (*ELEMENTWISE, *REDUCTIONS, *ROW_OPS, "getitem", "matmul")
    if not ops or any(o.kind not in kinds for o in ops):
        return None
    first = ops[0].args[0] if ops[0].args else None
    full = _shape(first) if _is_node(first) else ()
    if not full or _np2(full[-1]) <= LONG_ROW:
        return None
    rank, n = len(full), full[-1]

    def matvec(op: Any) -> bool:  # A[M, K] @ b[K, 1]: each row of A dotted with b
        a_, b_ = (op.args + [None, None])[:2]
        return (op.kind == "matmul" and _is_node(a_) and _is_node(b_) and _shape(a_) == full
                and rank == 2 and _shape(b_) == (n, 1))  # fmt: skip

    if any(o.kind == "matmul" and not matvec(o) for o in ops):
        return None
    if not any(o.kind in REDUCTIONS or o.kind in ROW_OPS or o.kind == "matmul" for o in ops):
        return None  # elementwise only: `elementwise`, `bcast`
    rows = math.prod(full[:-1])
    if any((o.kind in REDUCTIONS or o.kind in ROW_OPS) and not _is_last_dim(o.dim, rank)
           for o in ops):  # fmt: skip
        return None
    row_shapes = {full[:-1], full[:-1] + (1,)}
    params: list[str] = []
    binding: dict[str, dict[str, Any]] = {}
    loaded: dict[Any, tuple[str, str]] = {}  # input node -> (param name, "full" | "vec")
    level: dict[Any, int] = {}  # a computed node -> the pass after which it is known
    shape_of: dict[Any, str] = {}  # a computed node -> "full" | "row"
    by_node = {o.node: o for o in ops}

    def source(node: Any, column: bool = False) -> tuple[str, str]:
        """`column`: an [n, 1] matrix read as an [n] vector (a matrix-vector product's)."""
        if node in loaded:
            return loaded[node]
        src = (
            {"from": "input", "index": inputs.index(node)}
            if node in inputs
            else _param_binding(gm, node)
        )
        sh = _shape(node) if _is_node(node) else ()
        if src is None:
            raise NoTemplate(f"operand {node} is not a forward input, a parameter or a constant")
        if sh == full:
            nm, kind = f"x{len(params)}", "full"
            params.append(f'{nm}: al.Tensor["M", "N"]')
            binding[nm] = {**src, "view": "2d"}
        elif (sh in ((n,), (1, n)) or (len(sh) == rank and sh[-1] == n and math.prod(sh) == n)
              or (column and sh == (n, 1))):  # fmt: skip
            nm, kind = f"vec{len(params)}", "vec"
            params.append(f'{nm}: al.Tensor["N"]')
            binding[nm] = {**src, "view": "1d"}
        else:
            raise NoTemplate(f"operand {node} of shape {list(sh)} is neither [..., {n}] rows nor "
                             f"an [{n}] vector")  # fmt: skip
        loaded[node] = (nm, kind)
        return loaded[node]

    def lv(a: Any) -> int:
        return level.get(a, 0) if _is_node(a) else 0

    for op in ops:
        if op.kind == "getitem":
            src = op.args[0]
            if src not in level or op.params.get("index") != 0:
                raise NoTemplate("only the values ([0]) of max/min over a dim are supported")
            level[op.node], shape_of[op.node] = level[src], shape_of[src]
            continue
        if op.kind in ELEMENTWISE:
            kinds_ = []
            for a in op.args:
                if _const(a) is not None:
                    continue
                if a in shape_of:
                    kinds_.append(shape_of[a])
                else:
                    kinds_.append("full" if source(a)[1] in ("full", "vec") else "row")
            if not kinds_:
                raise NoTemplate(f"{op.kind} of constants only")
            level[op.node] = max(lv(a) for a in op.args)
            shape_of[op.node] = "full" if "full" in kinds_ else "row"
            continue
        x = op.args[0]
        if op.kind == "matmul":
            source(op.args[1], column=True)
        if _is_node(x) and x not in shape_of:
            source(x)
        if shape_of.get(x, "full") != "full":
            raise NoTemplate(f"{op.kind} of reduced rows")
        level[op.node] = lv(x) + 1
        shape_of[op.node] = "full" if op.kind in ROW_OPS else "row"
        if op.kind == "norm" and op.params.get("p", "fro") not in (1, 1.0, 2, 2.0, "fro"):
            raise NoTemplate(f"norm p={op.params.get('p')!r}; valid: 1, 2, 'fro'")
        if shape_of[op.node] == "row" and not op.tuple_out and _shape(op.node) not in row_shapes:
            raise NoTemplate(f"{op.kind} gives shape {_shape(op.node)}, not rows of {full}")
    if result not in shape_of:
        raise NoTemplate("the forward's result is not computed by the row program")
    passes = max(level.values())
    finals: dict[Any, str] = {}  # a reduction (or a softmax's stats) -> its row value(s)

    def expr(node: Any, p: int, memo: dict[Any, str], lines: list[str]) -> tuple[str, str]:
        """`node` in pass p's loop body (column tile c<p>), lines appended; (text, kind)."""
        c = _const(node)
        if c is not None:
            return c, "const"
        if node in memo:
            return memo[node], shape_of.get(node, "full")
        op = by_node.get(node)
        if op is None:  # an input
            nm, kind = source(node)
            tile = (f"{nm}.tile(ROWS, BN)[pm, c{p}]" if kind == "full"
                    else f"{nm}.tile(BN)[c{p}]")  # fmt: skip
            text = f"al.load({tile}).to(al.f32)" + ("" if kind == "full" else "[None, :]")
            lines.append(f"        {nm}_{p} = {text}\n")
            memo[node] = f"{nm}_{p}"
            return memo[node], "full"
        if op.kind == "getitem":
            memo[node] = expr(op.args[0], p, memo, lines)[0]
            return memo[node], shape_of[node]
        if op.kind in ELEMENTWISE:
            vals = [expr(a, p, memo, lines) for a in op.args]
            out_full = shape_of[node] == "full"
            names_ = [f"{v}[:, None]" if k == "row" and out_full else v for v, k in vals]
            text = _elementwise_expr(op, names_)
        elif op.kind in ROW_OPS:  # from the softmax's stats, known after an earlier pass
            e, _ = expr(op.args[0], p, memo, lines)
            m, s_ = finals[node].split(",")
            text = (f"al.exp({e} - {m}[:, None]) / {s_}[:, None]" if op.kind == "softmax"
                    else f"{e} - {m}[:, None] - al.log({s_})[:, None]")  # fmt: skip
        else:  # a reduction (a matrix-vector product's row sums): known after its pass
            memo[node] = finals[node]
            return memo[node], "row"
        name = f"f{len(memo)}_{p}"
        lines.append(f"        {name} = {text}\n")
        memo[node] = name
        return name, shape_of[node]

    body: list[str] = []
    for p in range(1, passes + 1):
        init: list[str] = []
        loop: list[str] = [f"        live{p} = c{p} * BN + col < ncols\n"]  # a name a pass
        after: list[str] = []
        memo: dict[Any, str] = {}
        for i, op in enumerate(ops):
            if level.get(op.node) != p or (op.kind not in REDUCTIONS and op.kind not in ROW_OPS
                                           and op.kind != "matmul"):  # fmt: skip
                continue
            e, _ = expr(op.args[0], p, memo, loop)
            a = f"r{i}"
            neg, pos = REDUCTIONS["amax"], REDUCTIONS["amin"]
            if op.kind in ("logsumexp", "softmax", "log_softmax"):
                init += [f"    {a}_m = al.full((ROWS,), {neg}, al.f32)\n",
                         f"    {a}_s = al.zeros((ROWS,), al.f32)\n"]  # fmt: skip
                loop += [
                    f"        {a}_n = al.maximum({a}_m, al.max(al.where(live{p}, {e}, {neg}), 1))\n",
                    f"        {a}_s = {a}_s * al.exp({a}_m - {a}_n) + al.sum(al.where(live{p}, "
                    f"al.exp({e} - {a}_n[:, None]), 0.0), 1)\n",
                    f"        {a}_m = {a}_n\n",
                ]
                if op.kind == "logsumexp":
                    after.append(f"    {a} = {a}_m + al.log({a}_s)\n")
                    finals[op.node] = a
                else:
                    finals[op.node] = f"{a}_m,{a}_s"
                continue
            if op.kind in ("amax", "amin"):
                neutral, fold = (neg, "max") if op.kind == "amax" else (pos, "min")
                init.append(f"    {a} = al.full((ROWS,), {neutral}, al.f32)\n")
                loop.append(f"        {a} = al.{'maximum' if fold == 'max' else 'minimum'}({a}, "
                            f"al.{fold}(al.where(live{p}, {e}, {neutral}), 1))\n")  # fmt: skip
                finals[op.node] = a
                continue
            pw = op.params.get("p", "fro") if op.kind == "norm" else None
            term = {None: e, 1: f"al.abs({e})"}.get(pw, f"{e} * {e}")
            if op.kind == "matmul":  # A's row tile times b's tile, summed
                term = f"{e} * {expr(op.args[1], p, memo, loop)[0]}"
            init.append(f"    {a}_s = al.zeros((ROWS,), al.f32)\n")
            loop.append(f"        {a}_s = {a}_s + al.sum(al.where(live{p}, {term}, 0.0), 1)\n")
            if op.kind == "mean":
                after.append(f"    {a} = {a}_s / ncols\n")
            elif pw in (2, 2.0, "fro"):
                after.append(f"    {a} = al.sqrt({a}_s)\n")
            else:
                after.append(f"    {a} = {a}_s\n")
            finals[op.node] = a
        body += init + [f"    for c{p} in al.range(ntiles):\n"] + loop + after
    if shape_of[result] == "full":
        w = passes + 1
        loop = []
        value, _ = expr(result, w, {}, loop)
        body += [f"    for c{w} in al.range(ntiles):\n", *loop,
                 f"        al.store(y.tile(ROWS, BN)[pm, c{w}], {value}.to(y.dtype))\n"]  # fmt: skip
        y_param, y_view = 'y: al.Tensor["M", "N"]', "2d"
        how = f"once per level of row reductions ({passes}) and once more to write the result"
    else:
        value = finals.get(result)
        if value is None:  # row values combined after the last pass
            lines: list[str] = []
            value = expr(result, passes, {}, lines)[0]
            body += [ln[4:] for ln in lines]
        body.append(f"    al.store(y.tile(ROWS)[pm], {value}.to(y.dtype))\n")
        y_param, y_view = 'y: al.Tensor["M"]', "1d"
        how = f"once per level of row reductions ({passes}), the result stored after the last"
    x0 = next((p_.split(":")[0] for p_ in params if p_.startswith("x")), None)
    if x0 is None:
        raise NoTemplate("a row program needs one forward input of the rows' shape")
    binding["y"] = {"from": "output", "view": y_view}
    src = _fill("rowlong", TASK=task, WHAT=" -> ".join(names), PASSES=how, ENTRY=ENTRY,
                PARAMS=", ".join(params), Y_PARAM=y_param, X0=x0,
                BODY="".join(body).rstrip("\n"))  # fmt: skip
    tiles = {"ROWS": [1, 2, 4], "BN": [4096, 2048, 8192]}
    return Emission("rowlong", src, ENTRY, tiles, binding, {"M": rows, "N": n}, names)


if _long_rows not in ROW_LOWERINGS:
    ROW_LOWERINGS.append(_long_rows)


def _flat_dims(flip: Any) -> list[Any]:
    dims = _arg(flip, 1, "dims")
    if len(flip.args) > 2:  # x.flip(1, 2)
        dims = list(flip.args[1:])
    return list(dims) if isinstance(dims, list | tuple) else [dims]


def _ancestors_of(node: Any, inputs: list[Any]) -> set[Any]:
    """The compute nodes `node` depends on, itself included (not placeholders)."""
    seen: set[Any] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if not _is_node(n) or n in seen or n in inputs or n.op in ("placeholder", "get_attr"):
            continue
        seen.add(n)
        for a in list(n.args) + list(n.kwargs.values()):
            todo += list(a) if isinstance(a, list | tuple) else [a]
    return seen


def _descendants(node: Any, ops: list[Op]) -> set[Any]:
    """The ops' nodes computed from `node` (not itself)."""
    out: set[Any] = set()
    live = {node}
    for o in ops:
        if any(a in live for a in o.args if _is_node(a)):
            out.add(o.node)
            live.add(o.node)
    return out
