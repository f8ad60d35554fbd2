"""Thread-level invariants of explicit-level kernels (`argus_core.ir.explicit`), with z3.

What is proved, for every iteration counter value `it >= 0` (z3 over the symbolic
counter, the kernel's constexprs fixed):

- **ring protocol** (per ring written by TMA and read by wgmma): the write and every read
  of iteration `it` use stage `it % STAGES` and the write completes on that stage's
  barrier; the reader waits on that barrier, before the read, for the phase of parity
  `(it // STAGES) % 2` (the write of iteration `it` is that barrier's `it // STAGES`-th
  completion); the reader releases the same stage only after its MMAs reading it have
  completed (`WgmmaWait` leaves none of them in flight); the writer waits, before writing,
  for the release of iteration `it - STAGES`, parity `(it // STAGES + 1) % 2` (a fresh
  barrier passes parity 1, so the first round does not wait); the `Expect` before the
  copies announces exactly the bytes of the copies that complete on that barrier; the
  writer's and reader's loop nests iterate the same space (else their counters differ).
- **fragment tags** (per wgmma): both operands hold the same reduction indices: the K
  coordinate of the A block (axis 1) equals that of the B block (axis 0) for every loop
  iteration, and their K extents agree; per lane, the lane of the m64nNk16 A fragment
  holding reduction index k is `4 * (m % 8) + (k % 8) // 2`, which counterexamples name.
- **shared layouts**: a buffer's swizzle agrees with the descriptors that TMA-copy it:
  z3 looks for an element whose byte address differs between the two swizzles.
- **shared-memory races** (program order, each loop body run twice for the back edge):
  registers written to a buffer while a TMA store may still read it (no `StoreWait(0)`),
  a TMA store of a buffer whose generic writes are not fenced (`FenceAsyncShared`), an
  accumulator read while wgmmas on it are in flight, a TMA store in flight at exit, and an
  accumulator layout whose warps are not the partition's (threads that do not exist, or
  two threads owning one element).

- **MMAs in flight** (issue order; `WgmmaWait(n)` leaves the last n running): the softmax
  reads no scores, and no rescale (in the softmax or `RescaleAcc`) touches an accumulator,
  that a running wgmma writes; no register A operand of a running wgmma is overwritten
  (`register-race`); the wait retiring a wgmma with a register A operand lists it in
  `keep` when other registers were computed meanwhile (`register-not-kept`: the compiler
  could reuse its registers under the MMA).
- **carried operands**: a register A operand that a `Move` later in the loop body sets
  holds the previous iteration's value: its fragment tags are the source softmax's with the
  loop variable one step back, and the value computed before the loop must agree with them
  at the first iteration (the overlapped attention's P).
- **barrier counts** summed over the partitions whose loops share a counter (two consumer
  warpgroups each releasing every stage), and the lse rows stored at the Q block's rows.

- **turn-taking handshakes** (`_check_handshakes`: two warpgroups taking turns issuing
  their MMAs): each wait is for this or the previous iteration's arrival, exactly one of a
  pair starts free (else deadlock or no turns), a turn is handed on only after it was taken.
- **group tags** (`_strip_groups`: a table-loaded scalar selecting an expert's block of
  stacked weights): the table is indexed by A's row block; output tags ignore the group;
  a gated epilogue (`SiluMul`) pairs each gate column with the up column `up_offset` later.
- **output ownership** (`_check_store_overlap`: stores of a persistent tile loop,
  `for tile in range(pid, T, npid)`, every tile once over all CTAs): no two tiles, and no
  two store ops on one tensor, write the same output element (inside the store's masks:
  a `StoreTile`'s `cols` and `limits`; a TMA store's whole box). Overlapping column tiles
  (the GEMM's `column_stride`) must store only their first NS columns; a counterexample
  names the shape, the two tiles and the element.
- **CDNA3** (`_check_lds`): LDS races per stage across barriers, blocked-layout owners,
  MFMA k per lane (16 or 32 lanes per k group), and fragment/output tags through LDS, a
  transposed B and a register P (the attention's scores' key block).

Every counterexample names its kind, the program point, and where it applies the
iteration, stage, phase, element, shared address, warp and lane.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3

from argus_core.ir import explicit as x
from argus_core.ir.expr import BinOp, Call, Cmp, Const, IntLike, Sym, binop, call, to_source, to_z3
from argus_core.layout.linear import blocked
from argus_core.types import VerifyReport
from argus_plugins.verifiers.smt.solver import _load_factor


@dataclass
class _Ctx:
    kernel: x.ExplicitKernel
    consts: dict[str, int]
    found: list[dict[str, Any]] = field(default_factory=list)
    assertions: int = 0
    undecided: list[str] = field(default_factory=list)  # obligations z3 left open (timeout)

    def report(self, kind: str, op: x.XOp | None, message: str, **detail: Any) -> None:
        point = op.point if op is not None else ""
        entry = {"kind": kind, "point": point, "message": message, **detail}
        if entry not in self.found:
            self.found.append(entry)


def _z3_check(solver: z3.Solver) -> Any:
    return solver.check()


def _sat(ctx: _Ctx, solver: z3.Solver, what: str) -> bool:
    """Whether `solver`'s query (a violation, or a case that leads to one) is satisfiable;
    an undecided one (`_decide`) is answered False, the answer that reports nothing."""
    return _decide(ctx, solver, what) == z3.sat


def _decide(ctx: _Ctx, solver: z3.Solver, what: str) -> Any:
    """z3's verdict on `solver`'s query. A timeout is not a proof: z3 gets a second, five
    times longer budget, and a query it still leaves open is recorded in `ctx.undecided`
    (the report says `unknown`, naming it)."""
    got = _z3_check(solver)
    if got == z3.unknown:
        solver.set("timeout", int(10000 * _load_factor()))
        got = _z3_check(solver)
    if got == z3.unknown and what not in ctx.undecided:
        ctx.undecided.append(what)
    return got


@dataclass
class _Site:
    """An op inside the innermost counted loop of a partition."""

    part: x.Partition
    loop: x.Loop
    nest: tuple[x.Loop, ...]
    index: int
    op: x.XOp


def verify_explicit(
    kernel: x.ExplicitKernel,
    consts: dict[str, int] | None = None,
    extra: Callable[[_Ctx], None] | None = None,
) -> VerifyReport:
    """Check every invariant in the module docstring (and `extra`'s, given the same
    context); `verified` when none fails."""
    start = time.perf_counter()
    ctx = _Ctx(kernel, {**kernel.consts, **(consts or {})})
    _check_layouts(ctx)
    _check_rings(ctx)
    _check_single_buffers(ctx)
    _check_barrier_counts(ctx)
    _check_handshakes(ctx)
    _check_races(ctx)
    _check_lds(ctx)
    _check_store_overlap(ctx)
    if extra is not None:  # more obligations over the same context (explicit_spec.py)
        extra(ctx)
    status = "violated" if ctx.found else "unknown" if ctx.undecided else "verified"
    if ctx.found:
        summary = (
            f"{kernel.name}: {len(ctx.found)} violations, first: {ctx.found[0]['kind']} at "
            f"{ctx.found[0]['point']}: {ctx.found[0]['message']}"
        )
    elif ctx.undecided:
        more = len(ctx.undecided) - 3
        summary = (
            f"{kernel.name}: {ctx.assertions - len(ctx.undecided)} of {ctx.assertions} "
            f"obligations proved; z3 timed out on {', '.join(ctx.undecided[:3])}"
            + (f" and {more} more" if more > 0 else "")
        )
    else:
        summary = f"{kernel.name}: {ctx.assertions} thread-level obligations proved"
    return VerifyReport(
        status=status,
        counterexamples=ctx.found,
        assertions=ctx.assertions,
        seconds=time.perf_counter() - start,
        summary=summary,
    )


# ------------------------------------------------------------------ z3 helpers


def _env(ctx: _Ctx, syms: set[Sym]) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for s in syms:
        env[s.name] = ctx.consts[s.name] if s.name in ctx.consts else z3.Int(s.name)
    return env


def _syms(*es: IntLike) -> set[Sym]:
    out: set[Sym] = set()
    for e in es:
        out |= x.expr_syms(e)
    return out


def _lets(ctx: _Ctx, part: x.Partition) -> dict[Sym, IntLike]:
    """Scalar `Let`s of a partition, to substitute into the expressions that use them."""
    return {Sym(op.name, "scalar"): op.value for op in x.walk(part.body) if isinstance(op, x.Let)}


def _expand(e: IntLike, lets: dict[Sym, IntLike]) -> IntLike:
    for _ in range(4):
        if isinstance(e, int) or not (x.expr_syms(e) & set(lets)):
            return e
        e = e.subs(lets)
    return e


def _counterexample(
    ctx: _Ctx, lhs: IntLike, rhs: IntLike, assume: list[Any] | None = None
) -> dict[str, int] | None:
    """A model (symbol -> value) where lhs != rhs, with every loop symbol >= 0 and every
    shape symbol >= 1; None when lhs == rhs is proved (or z3 left it open: `_decide`)."""
    return _compare(ctx, lhs, rhs, assume)[1]


def _equal(ctx: _Ctx, lhs: IntLike, rhs: IntLike) -> bool | None:
    """Whether lhs == rhs is proved (True), refuted (False) or left open by z3 (None): for
    a case split (which iteration's stage or phase an op uses), where taking an undecided
    case for a proved one would report the other case's violations."""
    verdict = _compare(ctx, lhs, rhs, None)[0]
    return None if verdict == z3.unknown else verdict == z3.unsat


def _compare(
    ctx: _Ctx, lhs: IntLike, rhs: IntLike, assume: list[Any] | None
) -> tuple[Any, dict[str, int] | None]:
    """z3's verdict on lhs != rhs and, where sat, the model `_counterexample` gives."""
    ctx.assertions += 1
    syms = _syms(lhs, rhs)
    env = _env(ctx, syms)
    solver = z3.Solver()
    solver.set("timeout", int(2000 * _load_factor()))  # slower when loaded
    for s in syms:
        if s.name in ctx.consts:
            continue
        solver.add(env[s.name] >= (1 if s.kind == "shape" else 0))
    for a in assume or []:
        solver.add(a(env))
    solver.add(to_z3(lhs, env) != to_z3(rhs, env))
    verdict = _decide(ctx, solver, f"{lhs} == {rhs}")
    if verdict != z3.sat:
        return verdict, None
    model = solver.model()
    return verdict, {
        s.name: model.eval(env[s.name], model_completion=True).as_long()
        for s in syms
        if s.name not in ctx.consts
    }


def _src(e: IntLike) -> str:
    return to_source(e)


# ------------------------------------------------------------------ ring protocol


def _sites(part: x.Partition) -> list[_Site]:
    out: list[_Site] = []

    def go(body: tuple[x.XOp, ...], nest: tuple[x.Loop, ...]) -> None:
        for op in body:
            if isinstance(op, x.Loop):
                inner = (*nest, op)
                if op.counter is not None:
                    out.extend(_Site(part, op, inner, i, o) for i, o in enumerate(op.body))
                go(op.body, inner)

    go(part.body, ())
    return out


def _nest_key(nest: tuple[x.Loop, ...]) -> tuple[Any, ...]:
    return tuple((lp.var.name, repr(lp.start), repr(lp.stop), repr(lp.step)) for lp in nest)


def _check_rings(ctx: _Ctx) -> None:
    k = ctx.kernel
    sites = [s for p in k.partitions for s in _sites(p)]
    lets = {p.name: _lets(ctx, p) for p in k.partitions}
    for ring in k.shared:  # a buffer TMA-written in a counted loop is a ring (any depth)
        stages = k.const(ring.stages, ctx.consts)
        writes = [s for s in sites if isinstance(s.op, x.TmaLoad) and s.op.dst == ring.name]
        reads = [
            (s, st)
            for s in sites
            if isinstance(s.op, x.Wgmma)
            for name, st in ((s.op.a, s.op.a_stage), (s.op.b, s.op.b_stage))
            if name == ring.name
        ]
        if not writes or not reads:
            continue
        for w in writes:
            it = w.loop.counter
            _stage_is(ctx, w.op, w.op.stage, it, stages, f"TMA write of {ring.name}")
            _check_writer(ctx, w, ring, stages, lets[w.part.name])
        bar = writes[0].op.bar
        seen: set[int] = set()
        for r, stage in reads:
            if _nest_key(r.nest) != _nest_key(writes[0].nest):
                lifted = _lift(r, writes[0].nest)
                if lifted is None:
                    ctx.report(
                        "iteration-space",
                        r.op,
                        f"{r.part.name} reads {ring.name} in loops {_nest_key(r.nest)} but "
                        f"{writes[0].part.name} writes it in {_nest_key(writes[0].nest)}: their "
                        "iteration counters, hence stages and phases, disagree",
                    )
                    continue
                if id(lifted.op) in seen:
                    continue  # one check per inner loop reading the stage
                seen.add(id(lifted.op))
                r = lifted
            it = r.loop.counter
            _stage_is(ctx, _read_op(r), stage, it, stages, f"wgmma read of {ring.name}")
            _check_reader(ctx, r, ring, stage, stages, bar, _release_bars(writes[0]))


def _lift(r: _Site, nest: tuple[x.Loop, ...]) -> _Site | None:
    """A read nested deeper than its ring's writer (a Q block TMA-loaded once per tile and
    read by every K step's wgmma) as a site of the writer's loop nest: the inner loop that
    holds the read, in the body of the loop at the writer's depth, which must count its
    iterations (its counter names the ring's iteration). None when the reader's loops do not
    begin with the writer's nest."""
    n = len(nest)
    if len(r.nest) <= n or _nest_key(r.nest[:n]) != _nest_key(nest):
        return None
    outer, inner = r.nest[n - 1], r.nest[n]
    if outer.counter is None or outer.counter.name != nest[-1].counter.name:
        return None
    return _Site(r.part, outer, r.nest[:n], outer.body.index(inner), inner)


def _read_op(r: _Site) -> x.XOp:
    """The op a counterexample names for a read: the wgmma, or the first wgmma of a lifted
    read's inner loop."""
    if isinstance(r.op, x.Loop):
        return next((op for op in x.walk(r.op.body) if isinstance(op, x.Wgmma)), r.op)
    return r.op


def _release_bars(w: _Site) -> set[str]:
    """The barriers a ring's writer waits on before its copy, besides the one the copy
    completes on: where the readers must release the stage."""
    return {op.bar for op in _before(w, lambda op: isinstance(op, x.Wait)) if op.bar != w.op.bar}


def _check_barrier_counts(ctx: _Ctx) -> None:
    """Each barrier's init count equals the arrivals one phase gets: one per Expect (the
    expecting thread arrives) and one per Arrive, per loop iteration where they are in a
    counted loop (summed over the partitions whose loops share that counter: two consumer
    warpgroups releasing one ring stage), else in the whole partition."""
    k = ctx.kernel
    for b in k.barriers:
        per_body: dict[tuple[str, ...], tuple[int, x.XOp]] = {}
        for p in k.partitions:
            loops = [
                op for op in x.walk(p.body) if isinstance(op, x.Loop) and op.counter is not None
            ]
            bodies = [(("loop", op.counter.name), op.body) for op in loops]
            top = [op for op in x.walk(p.body) if not any(op in body for _, body in bodies)]
            for key, body in [*bodies, (("top", p.name), tuple(top))]:
                ops = [
                    op for op in body if isinstance(op, x.Expect | x.Arrive) and op.bar == b.name
                ]
                if ops:
                    n, first = per_body.get(key, (0, ops[0]))
                    per_body[key] = (n + len(ops), first)
        ctx.assertions += 1
        for n, first in per_body.values():
            if n != b.count:
                ctx.report(
                    "barrier-count",
                    first,
                    f"barrier array {b.name} is initialised with count={b.count} but gets {n} "
                    f"arrival(s) per phase here: its phases "
                    f"{'never complete (hang)' if n < b.count else 'complete early (race)'}",
                    barrier=b.name,
                    count=b.count,
                    arrivals=n,
                )


def _handshake_bars(k: x.ExplicitKernel) -> set[str]:
    """Single-stage barriers no copy completes on (no Expect, no TmaLoad) that one
    partition waits on and another arrives on: turn-taking handshakes between partitions
    (the ping-pong of two consumer warpgroups), not ring barriers."""
    out = set()
    for b in k.barriers:
        if b.stages != 1:
            continue
        ops = [(p.name, op) for p, op in k.ops() if getattr(op, "bar", None) == b.name]
        if any(isinstance(op, x.Expect | x.TmaLoad) for _, op in ops):
            continue
        waiters = {p for p, op in ops if isinstance(op, x.Wait)}
        arrivers = {p for p, op in ops if isinstance(op, x.Arrive)}
        if len(waiters) == 1 and len(arrivers) == 1 and waiters != arrivers:
            out.add(b.name)
    return out


def _check_handshakes(ctx: _Ctx) -> None:
    """Turn-taking between two partitions (`_handshake_bars`): in counted loops sharing a
    counter, the arrival of iteration `it` completes phase `it` (parity `it % 2`); a wait
    may be for that same iteration's arrival (parity `it % 2`) or for the previous one
    (parity `(it + 1) % 2`, which a fresh barrier passes at it = 0) and nothing else; of
    two handshakes that form a cycle (P waits for Q's turn, Q for P's) exactly one waits
    for the previous iteration: both for the same one deadlocks at it = 0, both for the
    previous one lets both partitions go at once (no turns); and a partition hands the
    turn on (arrives) only after it has waited for its own."""
    k = ctx.kernel
    sites = {
        (s.part.name, s.op.bar, type(s.op)): s
        for p in k.partitions
        for s in _sites(p)
        if isinstance(s.op, x.Wait | x.Arrive)
    }
    offsets: dict[str, tuple[int, str, str, x.Wait]] = {}
    turns = _handshake_bars(k)
    for b in sorted(turns):
        waits = [s for (pn, bar, t), s in sites.items() if bar == b and t is x.Wait]
        arrives = [s for (pn, bar, t), s in sites.items() if bar == b and t is x.Arrive]
        if not waits or not arrives:
            continue
        w, a = waits[0], arrives[0]
        it = w.loop.counter
        ctx.assertions += 1
        same = _equal(ctx, w.op.phase, it % 2)
        prev = None if same is None else same or _equal(ctx, w.op.phase, (it + 1) % 2)
        if same is None or prev is None:  # undecided (named in the report): no case taken
            continue
        if same:
            off = 0
        elif prev:
            off = 1
        else:
            cex = _counterexample(ctx, w.op.phase, it % 2) or {}
            i = cex.get(it.name, 0)
            ctx.report(
                "wrong-phase",
                w.op,
                f"turn barrier {b} (arrived on by {a.part.name} once per iteration) is waited on "
                f"with parity {_src(w.op.phase)} = {_safe_eval(w.op.phase, {**cex, **ctx.consts})}"
                f" at iteration {it.name}={i}: neither that iteration's arrival (parity {i % 2}) "
                f"nor the previous one's ({(i + 1) % 2})",
                iteration=i,
                values=cex,
            )
            continue
        offsets[b] = (off, w.part.name, a.part.name, w.op)
        # the partition that waits here must hand its own turn on after this wait
        mine = [
            s
            for (pn, bar, t), s in sites.items()
            if pn == w.part.name and t is x.Arrive and bar in turns and bar != b
        ]
        for s in mine:
            if s.loop is w.loop and s.index < w.index:
                ctx.report(
                    "handshake-order",
                    s.op,
                    f"{w.part.name} hands the turn on ({s.op.bar}) before it waits for its "
                    f"own ({b} at {w.op.point}): the other partition may issue while this one "
                    "has not had its turn",
                )
    for b1, (o1, pw1, pa1, w1) in offsets.items():
        for b2, (o2, pw2, pa2, _) in offsets.items():
            if b1 < b2 and pw1 == pa2 and pa1 == pw2:
                ctx.assertions += 1
                if o1 + o2 != 1:
                    ctx.report(
                        "handshake-deadlock" if o1 + o2 == 0 else "wrong-phase",
                        w1,
                        f"{pw1} waits on {b1} and {pw2} on {b2} for "
                        + (
                            "the other's arrival of the same iteration: at it = 0 each waits "
                            "for the other (deadlock)"
                            if o1 + o2 == 0
                            else "the previous iteration's arrival: both pass at it = 0 and "
                            "issue together (no turns)"
                        ),
                        iteration=0,
                    )


def _check_single_buffers(ctx: _Ctx) -> None:
    """A buffer loaded once by TMA (outside counted loops) is read by a wgmma only after a
    Wait on the barrier its copy completes on, earlier in the reader's program order."""
    k = ctx.kernel
    in_loops = {s.op.dst for p in k.partitions for s in _sites(p) if isinstance(s.op, x.TmaLoad)}
    loads = {
        op.dst: op for _, op in k.ops() if isinstance(op, x.TmaLoad) and op.dst not in in_loops
    }
    for p in k.partitions:
        waited: set[str] = set()
        for op in x.walk(p.body):
            if isinstance(op, x.Wait):
                waited.add(op.bar)
            if not isinstance(op, x.Wgmma):
                continue
            for name, stage in ((op.a, op.a_stage), (op.b, op.b_stage)):
                load = loads.get(name)
                if stage is None or load is None:
                    continue
                ctx.assertions += 1
                if load.bar not in waited:
                    ctx.report(
                        "missing-wait",
                        op,
                        f"wgmma reads {name} without waiting on {load.bar}, the barrier its TMA "
                        f"copy at {load.point} completes on (a read of shared memory the copy may "
                        "not have written yet)",
                        barrier=load.bar,
                    )


def _stage_is(ctx: _Ctx, op: x.XOp, stage: IntLike, it: Sym, stages: int, what: str) -> bool:
    cex = _counterexample(ctx, stage, it % stages)
    if cex is None:
        return True
    env = {**cex, **ctx.consts}
    ctx.report(
        "wrong-stage",
        op,
        f"{what} uses stage {_src(stage)} = {_eval(stage, env)} at iteration {it.name}="
        f"{cex.get(it.name, 0)}, but that iteration's data is in stage {it.name} % {stages} = "
        f"{cex.get(it.name, 0) % stages}",
        iteration=cex.get(it.name, 0),
        stage=_eval(stage, env),
        expected_stage=cex.get(it.name, 0) % stages,
        values=cex,
    )
    return False


def _eval(e: IntLike, env: dict[str, int]) -> int:
    if isinstance(e, int):
        return e
    full = {s.name: env.get(s.name, 0) for s in x.expr_syms(e)}
    return int(e.evaluate(full))


def _before(site: _Site, pred) -> list[x.XOp]:
    return [op for op in site.loop.body[: site.index] if pred(op)]


def _after(site: _Site, pred) -> list[x.XOp]:
    return [op for op in site.loop.body[site.index + 1 :] if pred(op)]


def _check_reader(
    ctx: _Ctx,
    r: _Site,
    ring: x.Shared,
    stage: IntLike,
    stages: int,
    bar: str,
    release_bars: set[str],
) -> None:
    it = r.loop.counter
    read = _read_op(r)
    mine = _reads(r, ring)
    waits = _before(r, lambda op: isinstance(op, x.Wait) and op.bar == bar)
    if not waits:
        ctx.report(
            "missing-wait",
            read,
            f"wgmma reads {ring.name}[{_src(stage)}] without waiting on {bar}: the TMA write "
            "of this iteration may not have arrived (shared-memory race with the async proxy)",
            barrier=bar,
        )
    else:
        wait = waits[-1]
        if _stage_is(ctx, wait, wait.stage, it, stages, f"wait on {bar}"):
            _phase_is(ctx, wait, wait.phase, it, it // stages % 2, stages, "reader")
    # release: an Arrive after the read, on the barrier the writer waits on
    for early in _before(r, lambda op: isinstance(op, x.Arrive) and op.bar in release_bars):
        if _same_somewhere(ctx, early.stage, stage) is not None:
            ctx.report(
                "release-before-complete",
                early,
                f"stage {_src(early.stage)} of {ring.name} is released before the wgmma at "
                f"{read.point} reads it: the producer may overwrite it first (race)",
            )
    turns = _handshake_bars(ctx.kernel)
    for wrong in _after(
        r, lambda op: isinstance(op, x.Arrive) and op.bar not in release_bars | turns
    ):
        ctx.report(
            "wrong-barrier",
            wrong,
            f"this release arrives on {wrong.bar}, but the producer of {ring.name} waits on "
            f"{', '.join(sorted(release_bars)) or 'no barrier'}: the stage is never "
            "released (hang) and the other barrier's phases are corrupted",
            barrier=wrong.bar,
        )
    release = _after(r, lambda op: isinstance(op, x.Arrive) and op.bar in release_bars)
    if not release:
        ctx.report(
            "missing-release",
            read,
            f"{ring.name}[{_src(stage)}] is never released after this read: the producer "
            f"waits for it forever once the ring wraps (after {stages} iterations)",
        )
        return
    arrive = release[0]
    body = r.loop.body
    pos = body.index(arrive)
    own = _equal(ctx, arrive.stage, it % stages)
    behind = None if own is None else own or _equal(ctx, arrive.stage, (it + stages - 1) % stages)
    if own is None or behind is None:  # undecided (named in the report): no case taken
        return
    if own:
        # releases its own iteration's stage: the read must have completed by now
        if arrive.pred is not None and _can_be(ctx, arrive.pred, False, r.loop):
            ctx.report(
                "missing-release",
                arrive,
                f"the release is predicated on {_src(arrive.pred)}, which can be false: "
                "that iteration's stage is never released",
            )
        flying = _in_flight([("cur", op) for op in body[:pos]])
        if any(f == ("cur", op) for f in flying for op in mine):
            _report_early_release(ctx, arrive, ring, read, flying)
        return
    if not behind:
        _stage_is(ctx, arrive, arrive.stage, it, stages, f"release on {arrive.bar}")
        return
    # one behind: iteration it releases iteration it - 1, never at the loop's first step
    first = r.loop.var.eq(r.loop.start)
    if (
        arrive.pred is None
        or _can_be(ctx, arrive.pred, True, r.loop, first)
        or _can_be(ctx, arrive.pred, False, r.loop, r.loop.var.ne(r.loop.start))
    ):
        ctx.report(
            "double-release",
            arrive,
            f"releasing stage {_src(arrive.stage)} (iteration {it.name} - 1) must be skipped "
            f"exactly at the first step of loop {r.loop.var.name} "
            f"(pred {r.loop.var.name} != {_src(r.loop.start)}); with pred "
            f"{'None' if arrive.pred is None else _src(arrive.pred)} a stage is released twice "
            "or never, and the producer's phases run ahead of the consumers (overwrite race)",
        )
    flying = _in_flight([("prev", op) for op in body] + [("cur", op) for op in body[:pos]])
    if any(f == ("prev", op) for f in flying for op in mine):
        _report_early_release(ctx, arrive, ring, read, flying)
    # the loop's last iteration is released after the loop
    parent = r.nest[-2].body if len(r.nest) > 1 else r.part.body
    after = parent[parent.index(r.loop) + 1 :]
    tail = [op for op in after if isinstance(op, x.Arrive) and op.bar == arrive.bar]
    if not tail:
        ctx.report(
            "missing-release",
            r.loop,
            f"the stage of the last iteration of loop {r.loop.var.name} is never released "
            f"(no Arrive on {arrive.bar} after the loop): the producer waits for it forever",
        )
        return
    last = tail[0]
    # after the loop the counter is one past the last iteration
    if _counterexample(ctx, last.stage, (it + stages - 1) % stages) is not None:
        cex = _counterexample(ctx, last.stage, (it + stages - 1) % stages) or {}
        ctx.report(
            "wrong-stage",
            last,
            f"after loop {r.loop.var.name} the counter {it.name} is one past its last iteration, "
            f"whose stage is ({it.name} + {stages} - 1) % {stages}; this release uses "
            f"{_src(last.stage)} (e.g. {it.name}={cex.get(it.name, 0)})",
            values=cex,
        )
    flying = _in_flight(
        [("last", op) for op in body] + [("after", op) for op in after[: after.index(last)]]
    )
    if any(f == ("last", op) for f in flying for op in mine):
        _report_early_release(ctx, last, ring, read, flying)


def _in_flight(seq: list[tuple[str, x.XOp]]) -> list[tuple[str, x.XOp]]:
    """The wgmma instances still running at the end of `seq` (each WgmmaWait(p) leaves
    the last p issued)."""
    flying: list[tuple[str, x.XOp]] = []
    for tag, op in seq:
        if isinstance(op, x.Loop):  # after its last iteration: the body once, and twice (a
            # wgmma a back edge carries); either may be the state the loop leaves
            once = _in_flight([*flying, *((tag, o) for o in op.body)])
            twice = _in_flight([*flying, *((tag, o) for o in op.body * 2)])
            flying = once + [f for f in twice if f not in once]
        elif isinstance(op, x.Wgmma):
            flying.append((tag, op))
        elif isinstance(op, x.WgmmaWait):
            flying = flying[len(flying) - op.pending :] if op.pending else []
    return flying


def _reads(r: _Site, ring: x.Shared) -> list[x.XOp]:
    """The wgmmas of a read site that read `ring` (a lifted site: those in its loop)."""
    ops = x.walk(r.op.body) if isinstance(r.op, x.Loop) else [r.op]
    return [op for op in ops if isinstance(op, x.Wgmma) and ring.name in (op.a, op.b)] or [r.op]


def _report_early_release(ctx: _Ctx, arrive: x.Arrive, ring: x.Shared, read: x.XOp, flying) -> None:
    ctx.report(
        "release-before-complete",
        arrive,
        f"stage {_src(arrive.stage)} of {ring.name} is released while the wgmma at "
        f"{read.point} that reads it may still run ({len(flying)} in flight): the producer "
        "may overwrite it mid-read (race); retire it with WgmmaWait first",
        in_flight=[op.point for _, op in flying],
    )


def _can_be(ctx: _Ctx, pred: Any, value: bool, loop: x.Loop, assume: Any = None) -> bool:
    """Whether `pred` can evaluate to `value` for some iteration of `loop` (var >= start,
    var < stop) where `assume` holds."""
    ctx.assertions += 1
    conds = [pred, loop.var >= loop.start, loop.var < loop.stop] + (
        [assume] if assume is not None else []
    )
    syms = _syms(*conds)
    env = _env(ctx, syms)
    solver = z3.Solver()
    solver.set("timeout", int(2000 * _load_factor()))  # slower when loaded
    for sy in syms:
        if sy.name not in ctx.consts:
            solver.add(env[sy.name] >= (1 if sy.kind == "shape" else 0))
    p = to_z3(pred, env)
    p = p if z3.is_bool(p) else p != 0
    solver.add(p if value else z3.Not(p))
    for c in conds[1:]:
        t = to_z3(c, env)
        solver.add(t if z3.is_bool(t) else t != 0)
    return _sat(ctx, solver, f"whether {pred} can be {value} in the loop over {loop.var}")


def _phase_is(
    ctx: _Ctx, op: x.XOp, phase: IntLike, it: Sym, expected: IntLike, stages: int, role: str
) -> None:
    cex = _counterexample(ctx, phase, expected)
    if cex is None:
        return
    i = cex.get(it.name, 0)
    env = {**cex, **ctx.consts}
    ctx.report(
        "wrong-phase",
        op,
        f"{role} waits for phase parity {_src(phase)} = {_eval(phase, env)} at iteration "
        f"{it.name}={i} (stage {i % stages}), but the completion it needs has parity "
        f"{_src(expected)} = {_eval(expected, env)}",
        iteration=i,
        stage=i % stages,
        phase=_eval(phase, env),
        expected_phase=_eval(expected, env),
        values=cex,
    )


def _check_writer(
    ctx: _Ctx, w: _Site, ring: x.Shared, stages: int, lets: dict[Sym, IntLike]
) -> None:
    it = w.loop.counter
    # the barrier consumers release on: the Arrive in a reader of this ring
    releases = {
        op.bar for p in ctx.kernel.partitions for op in x.walk(p.body) if isinstance(op, x.Arrive)
    }
    waits = _before(w, lambda op: isinstance(op, x.Wait) and op.bar in releases)
    if not waits:
        ctx.report(
            "producer-overrun",
            w.op,
            f"TMA write of {ring.name}[{_src(w.op.stage)}] without waiting for the consumers' "
            f"release: at iteration {it.name} >= {stages} it overwrites a stage still being read",
        )
    else:
        wait = waits[-1]
        if _stage_is(ctx, wait, wait.stage, it, stages, f"wait on {wait.bar}"):
            _phase_is(ctx, wait, wait.phase, it, (it // stages + 1) % 2, stages, "producer")
    expects = _before(w, lambda op: isinstance(op, x.Expect) and op.bar == w.op.bar)
    if not expects:
        ctx.report(
            "missing-expect",
            w.op,
            f"no Expect on {w.op.bar} before this TMA copy: the barrier completes before the "
            "bytes arrive",
        )
        return
    exp = expects[-1]
    if w.index != max(
        i for i, op in enumerate(w.loop.body) if isinstance(op, x.TmaLoad) and op.bar == w.op.bar
    ):
        return  # check the byte count once per barrier, at its last copy
    copies = [op for op in w.loop.body if isinstance(op, x.TmaLoad) and op.bar == w.op.bar]
    if sorted(exp.descs) != sorted(op.desc for op in copies):
        got = sum(_block_bytes(ctx, d) for d in exp.descs)
        need = sum(_block_bytes(ctx, op.desc) for op in copies)
        ctx.report(
            "wrong-expect-bytes",
            exp,
            f"Expect announces {got} bytes ({', '.join(exp.descs)}) but the copies completing "
            f"on {w.op.bar} bring {need} ({', '.join(op.desc for op in copies)}): the phase "
            "completes early (race) or never (hang)",
            expected_bytes=need,
            announced_bytes=got,
        )
    else:
        _stage_is(ctx, exp, exp.stage, it, stages, f"expect on {exp.bar}")


def _block_bytes(ctx: _Ctx, desc: str) -> int:
    d = ctx.kernel.desc(desc)
    rows, cols = (ctx.kernel.const(b, ctx.consts) for b in d.block)
    return rows * cols * x.DTYPES[d.dtype] // 8


# ------------------------------------------------------------------ fragment tags


def _check_fragments(ctx: _Ctx) -> None:
    """Per wgmma: the reduction-index tags of A and B agree (and their extents); the rows
    and columns of a stored accumulator are the rows of A and the columns of B."""
    k = ctx.kernel
    writes: dict[str, tuple[x.TmaLoad, dict[Sym, IntLike]]] = {}
    for p in k.partitions:
        lets = _lets(ctx, p)
        for op in x.walk(p.body):
            if isinstance(op, x.TmaLoad):
                writes[op.dst] = (op, lets)
    mmas = {op.acc: op for _, op in k.ops() if isinstance(op, x.Wgmma)}
    softmax = {op.p: op for _, op in k.ops() if isinstance(op, x.OnlineSoftmax)}
    cols: dict[str, tuple[IntLike, str]] = {}  # accumulator -> B's column tag
    for p in k.partitions:
        for op in x.walk(p.body):
            if isinstance(op, x.Wgmma):
                tags = _mma_tags(ctx, op, writes, mmas, softmax, p)
                if tags is not None:
                    _compare_k(ctx, op, tags)
                    if tags.get("row") is not None and op.a_stage is not None:
                        rows = k.const(k.buffer(op.a).block[0], ctx.consts)
                        col, where = tags["col"]
                        tags["col"] = (_strip_groups(ctx, tags["row"][0], col, rows), where)
                        cols[op.acc] = (col, where)  # with the group: gate and up share it
                    _check_output_tags(ctx, p, op, tags)
                _check_acc_shape(ctx, op, softmax)
    # the gated epilogue pairs each gate column with its up column, in the same group (the
    # expert's stacked [gate; up] rows): up = gate + up_offset with the group offsets kept
    for _, op in k.ops():
        if isinstance(op, x.SiluMul) and op.gate in cols and op.up in cols:
            (gate, g_at), (up, u_at) = cols[op.gate], cols[op.up]
            cex = _counterexample(ctx, up, gate + op.up_offset)
            if cex is not None:
                env = {**cex, **ctx.consts}
                ctx.report(
                    "output-tag",
                    op,
                    f"silu(gate) * up pairs gate column {_src(gate)} = {_safe_eval(gate, env)} "
                    f"(loaded at {g_at}) with up column {_src(up)} = {_safe_eval(up, env)} "
                    f"(loaded at {u_at}); its partner is gate + {_src(op.up_offset)} = "
                    f"{_safe_eval(gate + op.up_offset, env)} (e.g. {cex})",
                    values=cex,
                )


def _strip_groups(ctx: _Ctx, row_tag: IntLike, col_tag: IntLike, rows_block: int) -> IntLike:
    """B's column tag without its group offset. A scalar read from a table (`LoadScalar`,
    e.g. the expert of a row block) in B's coordinate selects a group of a stacked operand
    ([E * N, K]: expert e's column n is row e * N + n), not a column: the output tags are
    compared with it set to 0. Proved here (`group-tag`): the table is indexed by the row
    block of A (`row_tag // rows_block`), so every row of the tile uses its own group."""
    tables = {o.name: (p, o) for p, o in ctx.kernel.ops() if isinstance(o, x.LoadScalar)}
    # a table scalar the rows also depend on (the number of row blocks in use, bounding the
    # tile order) is a shared quantity, not a group selector
    used = [
        sy for sy in x.expr_syms(col_tag) if sy.name in tables and sy not in x.expr_syms(row_tag)
    ]
    for sy in used:
        part, ld = tables[sy.name]
        idx = _expand(ld.index, _lets(ctx, part))
        want = row_tag // rows_block
        cex = _counterexample(ctx, idx, want)
        if cex is not None:
            ctx.report(
                "group-tag",
                ld,
                f"{ld.name} = {ld.ptr}[{_src(ld.index)}] selects the group (expert) of B's "
                f"block, but the A rows it multiplies are row block {_src(want)}; e.g. at "
                f"{cex} the tile's rows take another group's weights",
                values=cex,
            )
    return col_tag if not used or isinstance(col_tag, int) else col_tag.subs({sy: 0 for sy in used})


def _b_axes(op: x.Wgmma) -> tuple[int, int]:
    """(reduction axis, column axis) of B's shared block."""
    return (1, 0) if op.b_trans else (0, 1)


def _subs_once(e: IntLike, values: dict[Sym, IntLike]) -> IntLike:
    """`e` with each symbol of `values` replaced once (not again inside its replacement)."""
    return e if isinstance(e, int) else e.subs(values)


def _last_before(part: x.Partition, point: str, pred) -> Any:
    """The last op of `part` before `point` in program order (depth first) that satisfies
    `pred`, or None."""
    found = None
    for op in x.walk(part.body):
        if op.point == point:
            return found
        if pred(op):
            found = op
    return found


def _carried(part: x.Partition, op: x.Wgmma) -> tuple[x.Move, x.Loop] | None:
    """(the Move, its loop) when `op`'s register A operand is carried around a loop: a Move
    into it later in the same loop body, so at this wgmma it holds the previous
    iteration's value."""
    for loop in (o for o in x.walk(part.body) if isinstance(o, x.Loop)):
        points = [o.point for o in loop.body]
        if op.point not in points:
            continue
        later = loop.body[points.index(op.point) + 1 :]
        for o in later:
            if isinstance(o, x.Move) and o.dst == op.a:
                return o, loop
    return None


def _register_source(ctx, op, writes, mmas, softmax, part, sm) -> dict[str, Any] | None:
    """Tags of the scores the softmax `sm` read (the wgmma before it on its `s_acc`)."""
    src = None
    if part is not None:
        src = _last_before(part, sm.point, lambda o: isinstance(o, x.Wgmma) and o.acc == sm.s_acc)
    src = src or mmas.get(sm.s_acc)
    if src is None:
        return None
    inner = _mma_tags(ctx, src, writes, mmas, softmax, part)
    if inner is None:
        return None
    wsrc = writes[src.b][0]
    extent = ctx.kernel.const(ctx.kernel.desc(wsrc.desc).block[_b_axes(src)[1]], ctx.consts)
    return {"col": inner["col"], "extent": extent, "row": inner.get("row")}


def _mma_tags(ctx, op, writes, mmas, softmax, part=None) -> dict[str, Any] | None:
    """Tags (global coordinates of element 0, extent, where) of A's rows and K and of B's
    K and columns, following a register A back through OnlineSoftmax to its scores (and,
    for an operand carried around a loop by a Move, to the previous iteration's softmax:
    the loop variable one step back, with the value before the loop checked to agree)."""
    k = ctx.kernel
    if op.b not in writes:
        return None
    wb, lb = writes[op.b]
    kb_axis, nb_axis = _b_axes(op)
    db = k.desc(wb.desc)
    tags: dict[str, Any] = {
        "k_b": (_expand(wb.coords[kb_axis], lb), k.const(db.block[kb_axis], ctx.consts), wb.point),
        "col": (_expand(wb.coords[nb_axis], lb), wb.point),
    }
    if op.a_stage is not None:
        if op.a not in writes:
            return None
        wa, la = writes[op.a]
        da = k.desc(wa.desc)
        tags["k_a"] = (_expand(wa.coords[1], la), k.const(da.block[1], ctx.consts), wa.point)
        tags["row"] = (_expand(wa.coords[0], la), wa.point)
        return tags
    carried = _carried(part, op) if part is not None else None
    if carried is None:
        sm = None
        if part is not None:
            sm = _last_before(
                part, op.point, lambda o: isinstance(o, x.OnlineSoftmax) and o.p == op.a
            )
        sm = sm or softmax.get(op.a)
        got = _register_source(ctx, op, writes, mmas, softmax, part, sm) if sm else None
        if got is None:
            return None
        # P's column j is the score of the key in column j of the scores: B's column tag
        col, where = got["col"]
    else:
        move, loop = carried
        sm = _last_before(
            part, move.point, lambda o: isinstance(o, x.OnlineSoftmax) and o.p == move.src
        )
        got = _register_source(ctx, op, writes, mmas, softmax, part, sm) if sm else None
        if got is None:
            return None
        col, where = got["col"]
        col = _subs_once(col, {loop.var: loop.var - loop.step})  # the previous iteration's P
        where = f"{where} (one iteration back, carried by {move.point})"
        first = _last_before(
            part, loop.point, lambda o: isinstance(o, x.OnlineSoftmax) and o.p == op.a
        )
        init = _register_source(ctx, op, writes, mmas, softmax, part, first) if first else None
        entry = _subs_once(col, {loop.var: loop.start})
        if init is None or _counterexample(ctx, init["col"][0], entry) is not None:
            ctx.report(
                "fragment-tag",
                op,
                f"at the loop's first iteration {op.a} holds the value computed before the "
                f"loop{f' at {first.point}' if first else ' (none)'}, whose key block is not "
                f"the one the carried value would have ({_src(entry)})",
            )
    tags["k_a"] = (col, got["extent"], where)
    tags["row"] = got.get("row")
    return tags


def _check_acc_shape(ctx: _Ctx, op: x.Wgmma, softmax: dict[str, x.OnlineSoftmax]) -> None:
    """The accumulator's layout is the wgmma's: (rows of A) x (columns of B) with the
    instruction N equal to B's column extent; a register A is in the dot-operand layout of
    this very accumulator (OnlineSoftmax converts P against `o`)."""
    k = ctx.kernel
    zero = k.acc_decl(op.acc)
    if zero is None or not isinstance(zero.layout, x.WgmmaAcc):
        return
    ctx.assertions += 1
    b = k.buffer(op.b)
    cols = k.const(b.block[_b_axes(op)[1]], ctx.consts)
    rows_a = None
    if op.a_stage is not None:
        rows_a = k.const(k.buffer(op.a).block[0], ctx.consts)
    elif op.a in softmax:
        sm = softmax[op.a]
        if sm.o != op.acc:
            ctx.report(
                "fragment-layout",
                op,
                f"{op.a} was converted to the A-operand layout of {sm.o} (at {sm.point}) but "
                f"this wgmma accumulates into {op.acc}: per lane the registers hold other rows "
                "and k than the instruction reads",
            )
    got = (k.const(zero.rows, ctx.consts), k.const(zero.cols, ctx.consts))
    if got[1] != cols or (rows_a is not None and got[0] != rows_a):
        ctx.report(
            "fragment-layout",
            op,
            f"accumulator {op.acc} is laid out for a {got[0]}x{got[1]} tile (wgmma instruction N "
            f"= {got[1]}, at {zero.point}) but this wgmma produces "
            f"{rows_a if rows_a is not None else got[0]}x{cols}",
            acc_shape=got,
            mma_shape=(rows_a if rows_a is not None else got[0], cols),
        )


def _compare_k(ctx: _Ctx, op: x.Wgmma, tags: dict[str, Any]) -> None:
    (tag_a, ka, where_a), (tag_b, kb, where_b) = tags["k_a"], tags["k_b"]
    if ka != kb:
        ctx.report(
            "fragment-tag",
            op,
            f"A spans {ka} reduction indices, B {kb}: per lane the MMA pairs A and B elements "
            "of different k",
            k_a=ka,
            k_b=kb,
        )
        return
    cex = _counterexample(ctx, tag_a, tag_b)
    if cex is None:
        return
    env = {**cex, **ctx.consts}
    ta, tb = _eval(tag_a, env), _eval(tag_b, env)
    ctx.report(
        "fragment-tag",
        op,
        f"reduction-index tags disagree at {cex}: A's K axis holds k = {_src(tag_a)} + j = "
        f"{ta} + j, j < {ka} (from {where_a}), B's holds k = {_src(tag_b)} + j = {tb} + j "
        f"(from {where_b}); e.g. warp 0, lane 0, register 0 (the m64nNk16 fragment element "
        f"m=0, k=0) multiplies A[0, k={ta}] by B[k={tb}, 0]",
        values=cex,
        warp=0,
        lane=0,
        register=0,
        k_a=ta,
        k_b=tb,
    )


def _check_output_tags(ctx: _Ctx, part: x.Partition, mma: x.Wgmma, tags: dict[str, Any]) -> None:
    """The tile a partition stores from `mma.acc` sits at A's rows and B's columns (each
    partition computes its tile offsets itself)."""
    lets_c = _lets(ctx, part)
    written = {
        op.dst
        for op in x.walk(part.body)
        if isinstance(op, x.StoreShared | x.NormalizeStore)
        and (op.acc if isinstance(op, x.StoreShared) else op.o) == mma.acc
    }
    lses = [op for op in x.walk(part.body) if isinstance(op, x.StoreLse) and op.s_acc == mma.acc]
    for st in lses:  # the log-sum-exp of the score rows lands at those rows
        if tags.get("row") is None:
            continue
        src, where = tags["row"]
        dst = _expand(st.row0, lets_c)
        cex = _counterexample(ctx, src, dst)
        if cex is not None:
            env = {**cex, **ctx.consts}
            ctx.report(
                "output-tag",
                st,
                f"the log-sum-exp of the scores of rows {_safe_eval(src, env)}... (A loaded at "
                f"{where}) is stored at rows {_src(st.row0)} = {_safe_eval(dst, env)}... (e.g. {cex})",
                values=cex,
            )
    stores = [
        op
        for op in x.walk(part.body)
        if (isinstance(op, x.TmaStore) and op.src in written)
        or (isinstance(op, x.StoreTile) and op.acc == mma.acc)  # masked stores from registers
    ]
    for st in stores:
        for axis, key, what in ((0, "row", "row"), (1, "col", "column")):
            if tags.get(key) is None:
                continue
            src, where = tags[key]
            dst = _expand(st.coords[axis], lets_c)
            cex = _counterexample(ctx, src, dst)
            if cex is not None:
                env = {**cex, **ctx.consts}
                ctx.report(
                    "output-tag",
                    st,
                    f"the tile stored at {what} {_src(st.coords[axis])} = {_safe_eval(dst, env)} was "
                    f"computed from the {what}s {_safe_eval(src, env)}... loaded at {where} "
                    f"(e.g. {cex}): producer and consumer disagree on the tile",
                    values=cex,
                )


# ------------------------------------------------------------------ output ownership


def _stored_box(ctx: _Ctx, op: x.XOp) -> tuple[str, int, int, Any, Any] | None:
    """(tensor, rows, columns, column limit or None, limits or None) of a store op's box;
    None for an op that is not a store."""
    k = ctx.kernel
    if isinstance(op, x.TmaStore):
        d = next(d for d in k.descs if d.name == op.desc)
        rows, cols = (k.const(b, ctx.consts) for b in d.block)
        return d.tensor, rows, cols, None, None
    if isinstance(op, x.StoreTile):
        zero = k.acc_decl(op.acc)
        if zero is None:
            return None
        rows, cols = k.const(zero.rows, ctx.consts), k.const(zero.cols, ctx.consts)
        return k.ptr(op.ptr).tensor, rows, cols, op.cols, op.limits
    return None


def _check_store_overlap(ctx: _Ctx) -> None:
    """No output element is written twice: for two programs p1 != p2 (or two store ops on
    one tensor, p1 and p2 any, their partitions too) z3 looks for elements
    (r1 + u1, c1 + v1) == (r2 + u2, c2 + v2) inside both boxes (and their masks), every
    shape symbol free >= 1. A program is a tile of a persistent loop (`for tile in
    range(pid, T, npid)`: every tile once over all CTAs) for the stores in that loop, and a
    CTA of the launch grid (`Kernel.programs`: pid, pid_y below their extents) for the
    stores at a partition's top level. Stores whose coordinates depend on anything but the
    program, the shapes and the constexprs (a table-loaded expert, an inner loop) are not
    modelled."""
    k = ctx.kernel
    grid = k.meta.get("programs")
    groups: dict[Any, list] = {}
    for part in k.partitions:
        lets = _lets(ctx, part)
        for op in part.body:
            if (
                isinstance(op, x.Loop)
                and getattr(op.start, "name", None) == "pid"
                and getattr(op.step, "name", None) == "npid"
            ):
                stop = _expand(op.stop, lets)
                progs = ((op.var, stop),)
                for inner in op.body:
                    _add_store(ctx, groups, ("tiles", _src(stop)), progs, inner, lets)
            elif grid is not None:
                progs = tuple(zip((PID, PID_Y), grid, strict=False))
                _add_store(ctx, groups, "grid", progs, op, lets)
    for stores in groups.values():
        for i, (progs, op1, box1, c1) in enumerate(stores):
            for _, op2, box2, c2 in stores[i:]:
                if box1[0] == box2[0]:
                    _overlap_query(ctx, progs, (op1, box1, c1), (op2, box2, c2))


PID, PID_Y = Sym("pid", "pid", 0), Sym("pid_y", "pid", 0)


def _add_store(ctx: _Ctx, groups: dict, key: Any, progs: tuple, op: x.XOp, lets: dict) -> None:
    """`op`, when it is a store whose coordinates depend only on the program `progs`, the
    shapes and the constexprs, with its box and expanded coordinates, into `groups[key]`."""
    box = _stored_box(ctx, op)
    if box is None:
        return
    coords = [_expand(c, lets) for c in op.coords]
    free = _syms(*coords) - {v for v, _ in progs}
    if any(f.kind not in ("shape", "const") for f in free):
        return
    groups.setdefault(key, []).append((progs, op, box, coords))


def _multiples(ctx: _Ctx, requires: list[Any], env: dict[str, Any]) -> dict[Any, Any]:
    """Preconditions `X % C == 0` (X a shape, C a constexpr) as the substitution X = C * q:
    z3 then reasons linearly about X // C where the modulo constraint left it to nonlinear
    search. Rewrites `env`;
    returns {precondition: q}."""
    out = {}
    for pred in requires:
        if not (isinstance(pred, Cmp) and pred.op == "==" and pred.b == Const(0)):
            continue
        a = pred.a
        if not (isinstance(a, BinOp) and a.op == "%" and isinstance(a.a, Sym)):
            continue
        x_name, c = a.a.name, a.b
        c_val = c.value if isinstance(c, Const) else ctx.consts.get(getattr(c, "name", ""))
        if x_name in ctx.consts or x_name not in env or c_val is None:
            continue
        q = z3.Int(f"{x_name}_over_{c_val}")
        env[x_name] = c_val * q
        out[pred] = q
    return out


def _purify(e: IntLike, ctx: _Ctx, memo: dict, side: list) -> IntLike:
    """`e` with each `a // b` and `a % b` whose divisor is not a constexpr replaced by fresh
    integers d, r (`side` gets (a, b, d, r): a == d * b + r, 0 <= r < b). z3 proves the
    tiles' ownership at once this way where the divisions by a shape left it to nonlinear
    search, timing out one run in two (the persistent attention's `tile // cdiv(S, BM)`)."""
    if isinstance(e, int) or isinstance(e, Sym | Const):
        return e
    if isinstance(e, BinOp):
        a, b = _purify(e.a, ctx, memo, side), _purify(e.b, ctx, memo, side)
        if e.op in ("//", "%") and any(s.name not in ctx.consts for s in _syms(b)):
            key = (repr(a), repr(b))
            if key not in memo:
                n = len(memo)
                memo[key] = (Sym(f"_quot{n}", "loop", 0), Sym(f"_rem{n}", "loop", 0))
                side.append((a, b, *memo[key]))
            return memo[key][0] if e.op == "//" else memo[key][1]
        return binop(e.op, a, b)
    if isinstance(e, Call):
        return call(e.fn, *(_purify(a, ctx, memo, side) for a in e.args))
    return e


def _overlap_query(ctx: _Ctx, progs: tuple, a, b) -> None:
    """Report two stores of one element (see `_check_store_overlap`). Two encodings: the
    divisions purified (`_purify`: the persistent attention's, proved in ~0.01 s), then,
    where z3 gives up within that short budget, as they are (the GEMM's grouped order,
    whose `min` the purified form loses: ~0.1 s)."""
    ctx.assertions += 1
    for purify, budget in ((True, 200), (False, 2000)):
        verdict = _overlap_solve(ctx, progs, a, b, purify, budget)
        if verdict != "unknown":
            return
    ctx.undecided.append(f"output ownership of {a[0].point} / {b[0].point}")


def _overlap_solve(ctx: _Ctx, progs: tuple, a, b, purify: bool, budget_ms: int) -> str:
    """One encoding of `_overlap_query`: "sat" (reported), "unsat" or "unknown". `progs`:
    the program's coordinates and their extents ((tile, T) of a persistent loop, or
    (pid, X), (pid_y, Y) of the grid; an extent None is unbounded)."""
    (op1, (tensor, rows1, cols1, n1, lim1), c1), (op2, (_, rows2, cols2, n2, lim2), c2) = a, b
    tiles = len(progs) == 1 and progs[0][0].kind != "pid"
    names = ["tile"] if tiles else [v.name for v, _ in progs]
    one = [Sym(f"{n}_1", "loop", 0) for n in names]
    two = [Sym(f"{n}_2", "loop", 0) for n in names]
    memo: dict = {}
    side: list = []

    def at(e: IntLike, copy: list[Sym]) -> IntLike:
        if isinstance(e, int):
            return e
        e = e.subs({v: c for (v, _), c in zip(progs, copy, strict=True)})
        return _purify(e, ctx, memo, side) if purify else e

    r1, q1 = (at(e, one) for e in c1)
    r2, q2 = (at(e, two) for e in c2)
    stops = [stop for _, stop in progs if stop is not None]
    extra = [e for e in (n1, n2, *(lim1 or ()), *(lim2 or ())) if e is not None]
    requires = [pred for pred, _ in ctx.kernel.meta.get("requires", ())]
    syms = _syms(r1, q1, r2, q2, *stops, *extra, *requires, *(v for row in side for v in row))
    env = _env(ctx, syms | set(one) | set(two))
    multiples = _multiples(ctx, requires, env)
    u1, v1, u2, v2 = z3.Ints("u1 v1 u2 v2")

    def z(e: IntLike) -> Any:
        return to_z3(e, env)

    sol = z3.Solver()
    sol.set("timeout", int(budget_ms * _load_factor()))
    shapes = sorted(s.name for s in syms if s.kind == "shape" and s.name not in ctx.consts)
    for name in shapes:
        sol.add(env[name] >= 1)
    for pred in requires:  # the launcher's preconditions on the shapes
        if pred not in multiples:
            sol.add(z(pred))
    for q in multiples.values():
        sol.add(q >= 1)
    for num, den, d, r in side:  # the purified divisions (divisors >= 1 in every valid tile)
        sol.add(z(den) >= 1, z(num) == z(d) * z(den) + z(r), 0 <= z(r), z(r) < z(den))
    for (_, stop), p1, p2 in zip(progs, one, two, strict=True):
        sol.add(0 <= env[p1.name], 0 <= env[p2.name])
        if stop is not None:
            sol.add(env[p1.name] < z(stop), env[p2.name] < z(stop))
    if op1 is op2:  # one store op: two different programs (ordered when one coordinate)
        pairs = [(env[p1.name], env[p2.name]) for p1, p2 in zip(one, two, strict=True)]
        sol.add(
            pairs[0][0] < pairs[0][1] if len(pairs) == 1 else z3.Or(*(p != q for p, q in pairs))
        )
    for r, q, u, v, rows, cols, n, lim in (
        (r1, q1, u1, v1, rows1, cols1, n1, lim1),
        (r2, q2, u2, v2, rows2, cols2, n2, lim2),
    ):
        sol.add(0 <= u, u < rows, 0 <= v, v < cols)
        if n is not None:  # only the tile's first n columns are stored
            sol.add(v < z(n))
        if lim is not None:  # masked off past the tensor
            sol.add(z(r) + u < z(lim[0]), z(q) + v < z(lim[1]))
    sol.add(z(r1) + u1 == z(r2) + u2, z(q1) + v1 == z(q2) + v2)
    verdict = sol.check()
    if verdict != z3.sat:
        return "unsat" if verdict == z3.unsat else "unknown"
    m = sol.model()
    # a readable counterexample: the same violation with small programs and shapes, where
    # z3 finds one within the budget (only a violation pays for this second check)
    sol.push()
    sol.add(*(env[c.name] <= 3 for c in (*one, *two)))
    sol.add(*(env[n] <= 4 * max(rows1, cols1, rows2, cols2) for n in shapes))
    if sol.check() == z3.sat:
        m = sol.model()
    sol.pop()

    def val(e: Any) -> int:
        return m.eval(e, model_completion=True).as_long()

    shape = {name: val(env[name]) for name in shapes}
    got1 = {c.name: val(env[c.name]) for c in one}
    got2 = {c.name: val(env[c.name]) for c in two}
    if tiles:
        who1, who2 = f"tile {got1['tile_1']}", f"tile {got2['tile_2']}"
    else:
        who1 = "program (" + ", ".join(f"{n}={v}" for n, v in zip(names, got1.values())) + ")"
        who2 = "program (" + ", ".join(f"{n}={v}" for n, v in zip(names, got2.values())) + ")"
    writers = "two CTAs" if list(got1.values()) != list(got2.values()) else "two stores of a CTA"
    row, col = val(z(r1) + u1), val(z(q1) + v1)
    both = op1.point if op1 is op2 else f"{op1.point} and {op2.point}"
    w1 = _src(cols1 if n1 is None else n1)
    w2 = _src(cols2 if n2 is None else n2)
    ctx.report(
        "output-overlap",
        op2,
        f"{tensor}[{row}, {col}] is written by {who1} and by {who2} ({both}, shape "
        f"{shape}): {who1} stores {rows1}x{w1} at ({', '.join(map(_src, op1.coords))}) = "
        f"({val(z(r1))}, {val(z(q1))}), {who2} {rows2}x{w2} at "
        f"({', '.join(map(_src, op2.coords))}) = ({val(z(r2))}, {val(z(q2))}): {writers} "
        "write one element (a store wider than the programs' stride?)",
        values={**shape, **got1, **got2, "row": row, "col": col},
    )
    return "sat"


# ------------------------------------------------------------------ layouts


def _swizzled(addr, swizzle: int):
    if swizzle == 0:
        return addr
    bits = {32: 1, 64: 3, 128: 7}[swizzle]
    return addr ^ ((z3.LShR(addr, 7) & bits) << 4)


def _check_layouts(ctx: _Ctx) -> None:
    k = ctx.kernel
    for p, op in k.ops():
        if isinstance(op, x.TmaLoad | x.TmaStore):
            buf = k.buffer(op.dst if isinstance(op, x.TmaLoad) else op.src)
            d = k.desc(op.desc)
            _same_layout(ctx, op, d, buf)
        if isinstance(op, x.ZeroAcc):
            warps = op.layout.warps[0] * op.layout.warps[1]
            if warps != p.warps:
                ctx.report(
                    "layout-warps",
                    op,
                    f"accumulator layout spreads over {warps} warps but partition {p.name} has "
                    f"{p.warps}: warps {p.warps}..{warps - 1} own rows no thread computes"
                    if warps > p.warps
                    else f"accumulator layout spreads over {warps} warps but partition {p.name} "
                    f"has {p.warps}: warps {warps}..{p.warps - 1} duplicate rows, two threads "
                    "store each element (race)",
                    warp=min(warps, p.warps),
                )
    _check_fragments(ctx)


def _same_layout(ctx: _Ctx, op: x.XOp, d: x.Desc, buf: x.Shared) -> None:
    rows, cols = (ctx.kernel.const(b, ctx.consts) for b in buf.block)
    ebytes = x.DTYPES[buf.dtype] // 8
    if d.layout == buf.layout and tuple(d.block) == tuple(buf.block) and d.dtype == buf.dtype:
        ctx.assertions += 1
        return
    r, c = z3.BitVec("row", 32), z3.BitVec("col", 32)
    addr = r * (cols * ebytes) + c * ebytes
    solver = z3.Solver()
    solver.add(z3.ULT(r, rows), z3.ULT(c, cols))
    solver.add(_swizzled(addr, d.layout.swizzle_bytes) != _swizzled(addr, buf.layout.swizzle_bytes))
    ctx.assertions += 1
    if _sat(ctx, solver, f"the swizzles of {d.name} and {buf.name} agree"):
        m = solver.model()
        row, col = m[r].as_long(), m[c].as_long()
        a = row * cols * ebytes + col * ebytes

        def sw(v: int, s: int) -> int:
            return v if s == 0 else v ^ (((v >> 7) & {32: 1, 64: 3, 128: 7}[s]) << 4)

        ctx.report(
            "wrong-swizzle",
            op,
            f"{d.name} moves {buf.name} with a {d.layout.swizzle_bytes}B swizzle but the buffer "
            f"is laid out with {buf.layout.swizzle_bytes}B: element ({row}, {col}) is at shared "
            f"byte {sw(a, d.layout.swizzle_bytes)} for TMA and {sw(a, buf.layout.swizzle_bytes)} "
            "for its other accessors",
            element=(row, col),
            address=sw(a, d.layout.swizzle_bytes),
            other_address=sw(a, buf.layout.swizzle_bytes),
        )
    elif d.layout != buf.layout or tuple(d.block) != tuple(buf.block):
        ctx.report(
            "layout-mismatch",
            op,
            f"{d.name} ({d.block}, {d.layout}) and {buf.name} ({buf.block}, {buf.layout}) differ",
        )


# ------------------------------------------------------------------ races (program order)


@dataclass
class _State:
    stores_reading: dict[str, str] = field(default_factory=dict)  # buffer -> TmaStore point
    unfenced: dict[str, str] = field(default_factory=dict)  # buffer -> StoreShared point
    # the partition's wgmmas in flight, in issue order (a wait leaves the last `pending`)
    flying: list[x.Wgmma] = field(default_factory=list)
    # register operands written (softmax, move) since each in-flight wgmma was issued
    written_since: dict[str, list[str]] = field(default_factory=dict)  # wgmma point -> regs


def _flying_on(st: _State, acc: str) -> list[x.Wgmma]:
    return [op for op in st.flying if op.acc == acc]


def _read_in_flight(ctx: _Ctx, st: _State, op: x.XOp, acc: str, what: str) -> None:
    mine = _flying_on(st, acc)
    if mine:
        ctx.report(
            "acc-read-in-flight",
            op,
            f"{what} {acc} while the wgmma at {mine[-1].point} may still write it "
            "(missing WgmmaWait that retires it)",
        )


def _write_regs(ctx: _Ctx, st: _State, op: x.XOp, reg: str) -> None:
    """`reg` is (re)written: an in-flight wgmma reading it as its A operand would read a
    value that changes under it."""
    for mma in st.flying:
        if mma.a_stage is None and mma.a == reg:
            ctx.report(
                "register-race",
                op,
                f"register operand {reg} is overwritten while the wgmma at {mma.point} that "
                "reads it may still run: retire it first (WgmmaWait)",
                register=reg,
            )
        st.written_since.setdefault(mma.point, []).append(reg)


def _check_races(ctx: _Ctx) -> None:
    for p in ctx.kernel.partitions:
        st = _State()
        _run(ctx, p, p.body, st)
        for buf, point in st.stores_reading.items():
            ctx.report(
                "store-in-flight-at-exit",
                _last(p.body),
                f"partition {p.name} ends while the TMA store at {point} may still read "
                f"{buf}: shared memory is released under it (missing StoreWait(0))",
                buffer=buf,
            )


def _last(body: tuple[x.XOp, ...]) -> x.XOp | None:
    return body[-1] if body else None


def _run(ctx: _Ctx, part: x.Partition, body: tuple[x.XOp, ...], st: _State) -> None:
    for op in body:
        if isinstance(op, x.Loop):
            for _ in range(2):  # the second pass sees the state the back edge carries
                _run(ctx, part, op.body, st)
        elif isinstance(op, x.Wgmma):
            st.flying.append(op)
            st.written_since[op.point] = []
        elif isinstance(op, x.WgmmaWait):
            keep = len(st.flying) - op.pending if op.pending else len(st.flying)
            retired, st.flying = st.flying[:keep], st.flying[keep:]
            for mma in retired:  # a register A operand must outlive its MMA
                regs = st.written_since.pop(mma.point, [])
                if mma.a_stage is None and regs and mma.a not in op.keep:
                    ctx.report(
                        "register-not-kept",
                        op,
                        f"this wait retires the wgmma at {mma.point}, which reads register "
                        f"{mma.a}, after {', '.join(sorted(set(regs)))} were computed: the "
                        f"compiler may reuse {mma.a}'s registers for them while the MMA still "
                        f"reads it; list {mma.a} in keep",
                        register=mma.a,
                    )
        elif isinstance(op, x.OnlineSoftmax):
            _read_in_flight(ctx, st, op, op.s_acc, "the softmax reads")
            if not op.alpha:
                _read_in_flight(ctx, st, op, op.o, "the softmax rescales")
            _write_regs(ctx, st, op, op.p)
        elif isinstance(op, x.RescaleAcc):
            _read_in_flight(ctx, st, op, op.acc, "the rescale multiplies")
        elif isinstance(op, x.SiluMul):
            _read_in_flight(ctx, st, op, op.gate, "the gated epilogue reads")
            _read_in_flight(ctx, st, op, op.up, "the gated epilogue reads")
        elif isinstance(op, x.Move):
            _write_regs(ctx, st, op, op.dst)
        elif isinstance(op, x.StoreShared | x.NormalizeStore):
            acc = op.acc if isinstance(op, x.StoreShared) else op.o
            mine = _flying_on(st, acc)
            if mine:
                ctx.report(
                    "acc-read-in-flight",
                    op,
                    f"{acc} is read while wgmma {mine[-1].point} may still "
                    "write it (missing WgmmaWait(0))",
                )
            if op.dst in st.stores_reading:
                ctx.report(
                    "shared-race",
                    op,
                    f"the {part.warps * 32} threads of {part.name} write {op.dst} while the TMA "
                    f"store at {st.stores_reading[op.dst]} may still read it (no StoreWait(0) "
                    "between): e.g. warp 0, lane 0 overwrites element (0, 0)",
                    buffer=op.dst,
                    warp=0,
                    lane=0,
                    element=(0, 0),
                )
            st.unfenced[op.dst] = op.point
        elif isinstance(op, x.FenceAsyncShared):
            st.unfenced.clear()
        elif isinstance(op, x.TmaStore):
            if op.src in st.unfenced:
                ctx.report(
                    "shared-race",
                    op,
                    f"TMA store reads {op.src} written by threads at {st.unfenced[op.src]} "
                    "without FenceAsyncShared between: the async proxy may read stale data",
                    buffer=op.src,
                )
            st.stores_reading[op.src] = op.point
        elif isinstance(op, x.StoreWait):
            if op.pending == 0:
                st.stores_reading.clear()


# ------------------------------------------------------------------ generic shared (LDS) path


def _check_lds(ctx: _Ctx) -> None:
    """Kernels that stage operands through shared memory with generic stores (CDNA3):
    every pair of accesses to one buffer stage, at least one a write, by different threads,
    must have a workgroup Barrier between them in program order; stores from a register
    layout must not give one element to two threads; MFMA operands must agree on the
    reduction index per lane (k_width) and in their global K coordinates (tags)."""
    k = ctx.kernel
    for p in k.partitions:
        for site_loop in (
            op for op in x.walk(p.body) if isinstance(op, x.Loop) and op.counter is not None
        ):
            _lds_races(ctx, site_loop)
        loads = {op.dst: op for op in x.walk(p.body) if isinstance(op, x.LoadTile)}
        stores = {op.dst: op for op in x.walk(p.body) if isinstance(op, x.StoreRegs)}
        softmax = {op.p: op for op in x.walk(p.body) if isinstance(op, x.OnlineSoftmax)}
        mfmas = {op.acc: op for op in x.walk(p.body) if isinstance(op, x.Mfma)}
        lets = _lets(ctx, p)
        for op in x.walk(p.body):
            if isinstance(op, x.LoadTile):
                _owners_unique(ctx, op)
            if isinstance(op, x.Mfma):
                _mfma_lanes(ctx, op)
                tags = _mfma_tags(ctx, op, loads, stores, softmax, mfmas, lets)
                if tags is None:
                    continue
                (m_tag, _, a_at), (ka_tag, ka, _), (kb_tag, kb, _), (n_tag, _, b_at) = tags
                if op.a_stage is not None:
                    rows = k.const(k.buffer(op.a).block[0], ctx.consts)
                    n_tag = _strip_groups(ctx, m_tag, n_tag, rows)
                if ka != kb:
                    ctx.report(
                        "fragment-tag",
                        op,
                        f"A's K extent is {ka} (from {a_at}), B's is {kb} (from {b_at}), "
                        f"lane 0 register 0: the MFMA pairs k = 0..{ka - 1} of A with "
                        f"k = 0..{kb - 1} of B (a transposed or mis-shaped operand)",
                        lane=0,
                        register=0,
                    )
                    continue
                cex = _counterexample(ctx, ka_tag, kb_tag)
                if cex is not None:
                    env = {**cex, **ctx.consts}
                    ctx.report(
                        "fragment-tag",
                        op,
                        f"A's K axis holds k = {_src(ka_tag)} + j (j < {ka}) = "
                        f"{_safe_eval(ka_tag, env)} + j, B's holds k = {_src(kb_tag)} + j "
                        f"(j < {kb}) = {_safe_eval(kb_tag, env)} + j (from {a_at} and "
                        f"{b_at}): the MFMA multiplies mismatched reduction indices",
                        values=cex,
                    )
                for st in (
                    o for o in x.walk(p.body) if isinstance(o, x.StoreTile) and o.acc == op.acc
                ):
                    for axis, tag, at in ((0, m_tag, a_at), (1, n_tag, b_at)):
                        cex = _counterexample(ctx, tag, _expand(st.coords[axis], lets))
                        if cex is not None:
                            ctx.report(
                                "output-tag",
                                st,
                                f"the tile stored at {_src(st.coords[axis])} (axis {axis}) was "
                                f"computed from operands loaded at {_src(tag)} ({at}), e.g. "
                                f"at {cex}",
                                values=cex,
                            )
                for lse in (
                    o for o in x.walk(p.body) if isinstance(o, x.StoreLse) and o.s_acc == op.acc
                ):
                    cex = _counterexample(ctx, m_tag, _expand(lse.row0, lets))
                    if cex is not None:
                        ctx.report(
                            "output-tag",
                            lse,
                            f"the lse rows stored at {_src(lse.row0)} belong to the scores of "
                            f"the query rows loaded at {_src(m_tag)} ({a_at}), e.g. at {cex}",
                            values=cex,
                        )


def _safe_eval(e: IntLike, env: dict[str, int]) -> str:
    try:
        return str(_eval(e, env))
    except ZeroDivisionError:
        return "?"


def _mfma_tags(ctx, op, loads, stores, softmax, mfmas, lets, depth=0):
    """((M tag, _, where), (A's K tag, extent, _), (B's K tag, extent, _), (N tag, _, where))
    of an MFMA: the global coordinates its operands' first element came from (element i of
    an axis holds tag + i). A from LDS or registers loaded by a `LoadTile`, or a softmax's P
    (rows: its scores' A rows; columns: the keys of its scores' B operand). None when an
    operand's origin is unknown."""

    def tile(name, stage):
        ld = loads.get(stores[name].src) if stage is not None and name in stores else None
        if ld is None and stage is None:
            ld = loads.get(name)
        return ld

    k = ctx.kernel
    if op.a_stage is None and op.a in softmax:
        if depth > 2 or softmax[op.a].s_acc not in mfmas:
            return None
        inner = _mfma_tags(
            ctx, mfmas[softmax[op.a].s_acc], loads, stores, softmax, mfmas, lets, depth + 1
        )
        if inner is None:
            return None
        (m_tag, _, a_at), _, _, (n_tag, n_ext, b_at) = inner
        a = ((m_tag, 0, a_at), (n_tag, n_ext, f"P of {softmax[op.a].point} <- {b_at}"))
    else:
        la = tile(op.a, op.a_stage)
        if la is None:
            return None
        ext = k.const(la.block[1], ctx.consts)
        a = (
            (_expand(la.coords[0], lets), 0, la.point),
            (_expand(la.coords[1], lets), ext, la.point),
        )
    lb = tile(op.b, op.b_stage)
    if lb is None:
        return None
    kx, nx = (1, 0) if op.b_trans else (0, 1)
    b = (
        (_expand(lb.coords[kx], lets), k.const(lb.block[kx], ctx.consts), lb.point),
        (_expand(lb.coords[nx], lets), k.const(lb.block[nx], ctx.consts), lb.point),
    )
    return a[0], a[1], b[0], b[1]


def _lds_accesses(body: tuple[x.XOp, ...]) -> list[tuple[int, x.XOp, str, IntLike, bool]]:
    """(position, op, buffer, stage, is_write) of generic shared accesses in a loop body."""
    out = []
    for i, op in enumerate(body):
        if isinstance(op, x.StoreRegs):
            out.append((i, op, op.dst, op.stage, True))
        elif isinstance(op, x.Mfma):
            out += [(i, op, op.a, op.a_stage, False), (i, op, op.b, op.b_stage, False)]
    return out


def _lds_races(ctx: _Ctx, loop: x.Loop) -> None:
    body = loop.body
    it = loop.counter
    barriers = [i for i, op in enumerate(body) if isinstance(op, x.Barrier)]
    acc = _lds_accesses(body)
    for p1, op1, buf1, st1, w1 in acc:
        for p2, op2, buf2, st2, w2 in acc:
            if buf1 != buf2 or not (w1 or w2) or op1 is op2:
                continue
            # op1 at iteration it, op2 at iteration it + d, with no barrier in between
            between_same = any(p1 < b < p2 for b in barriers)
            after1 = sum(1 for b in barriers if b > p1)
            before2 = sum(1 for b in barriers if b < p2)
            cases = []
            if p1 < p2 and not between_same:
                cases.append(0)
            if after1 + before2 == 0:
                cases.append(1)
            if not barriers:
                cases.append(2)
            for d in cases:
                nxt = st2 if isinstance(st2, int) else st2.subs({it: it + d}) if d else st2
                same = _same_somewhere(ctx, st1, nxt)
                if same is None:
                    continue
                i = same.get(it.name, 0)
                stage = _eval(st1, {**same, **ctx.consts})
                kind_ = (
                    "write-after-read"
                    if w2 and not w1
                    else "read-after-write"
                    if w1 and not w2
                    else "write-after-write"
                )
                ctx.report(
                    "shared-race",
                    op2,
                    f"{kind_} on {buf1}[{stage}]: {op1.point} at iteration {it.name}={i} and "
                    f"{op2.point} at iteration {i + d} touch the same stage with no Barrier "
                    f"between; the threads of warp 0 lane 0 that store element (0, 0) race with "
                    "the other warps that read it as an MFMA operand",
                    buffer=buf1,
                    stage=stage,
                    iteration=i,
                    other_point=op1.point,
                    warp=0,
                    lane=0,
                    element=(0, 0),
                )
                break


def _same_somewhere(ctx: _Ctx, a: IntLike, b: IntLike) -> dict[str, int] | None:
    """A model (loop symbols >= 0) where a == b, or None when they always differ."""
    ctx.assertions += 1
    syms = _syms(a, b)
    env = _env(ctx, syms)
    solver = z3.Solver()
    solver.set("timeout", int(2000 * _load_factor()))  # slower when loaded
    for sy in syms:
        if sy.name not in ctx.consts:
            solver.add(env[sy.name] >= (1 if sy.kind == "shape" else 0))
    solver.add(to_z3(a, env) == to_z3(b, env))
    if not _sat(ctx, solver, f"{a} != {b}"):
        return None
    m = solver.model()
    return {
        sy.name: m.eval(env[sy.name], model_completion=True).as_long()
        for sy in syms
        if sy.name not in ctx.consts
    }


def _owners_unique(ctx: _Ctx, op: x.LoadTile) -> None:
    """No two threads hold (and then store to shared) one element of the tile."""

    shape = [ctx.kernel.const(b, ctx.consts) for b in op.block]
    lay = op.layout
    ll = blocked(shape, lay.size_per_thread, lay.threads_per_warp, lay.warps, lay.order)
    ctx.assertions += 1
    if ll.is_injective():
        return
    for name in ("lane", "warp"):
        for bit, vec in enumerate(ll.bases.get(name, ())):
            if not any(vec):
                ctx.report(
                    "duplicate-owner",
                    op,
                    f"layout {lay} over the {shape} tile broadcasts: {name} {1 << bit} holds the "
                    f"same elements as {name} 0 (e.g. element (0, 0)), so two threads store one "
                    "shared element",
                    **{name: 1 << bit},
                    element=(0, 0),
                )
                return


def _mfma_lanes(ctx: _Ctx, op: x.Mfma) -> None:
    """Per lane, the MFMA operand fragments hold k = (lane // M) * k_width + r (M = 16 for
    16x16x16, 32 for 32x32x8): A and B must give each lane and register the same k."""
    layout = ctx.kernel.acc_decl(op.acc).layout
    if not isinstance(layout, x.MfmaAcc):
        return
    lane, reg = z3.Int("lane"), z3.Int("register")
    kw_a, kw_b = layout.k_width_a, layout.k_width_b
    solver = z3.Solver()
    solver.add(lane >= 0, lane < 64, reg >= 0, reg < min(kw_a, kw_b))
    group = layout.instr[0]
    solver.add((lane / group) * kw_a + reg != (lane / group) * kw_b + reg)
    ctx.assertions += 1
    if _sat(ctx, solver, f"the k of {op.point}'s MFMA fragments agree"):
        m = solver.model()
        ln, r = m[lane].as_long(), m[reg].as_long()
        ctx.report(
            "fragment-tag",
            op,
            f"lane {ln}, register {r}: the A fragment (k_width {kw_a}) holds k = "
            f"{(ln // group) * kw_a + r}, the B fragment (k_width {kw_b}) holds k = "
            f"{(ln // group) * kw_b + r}",
            lane=ln,
            register=r,
            warp=0,
        )
