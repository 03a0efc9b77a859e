"""What a lowered or compiled module holds, read from its *structure* (exercises 9 and 10).

Both exercises ask the learner to read IR text (StableHLO, HLO, optimized HLO).  The
grader judges those readings against a route that never parses text:

* **StableHLO**: the MLIR module ``lowered.compiler_ir("stablehlo")`` returns, walked
  region by region, block by block (``stablehlo_op_counts``): every operation at every
  depth, one count where it is written.
* **HLO**, before and after XLA's passes: the module's serialized ``HloModuleProto``
  (``XlaComputation.as_serialized_hlo_module_proto()`` for ``lowered.compiler_ir("hlo")``;
  the loaded executable's ``hlo_modules()[0]`` for ``lowered.compile()``), decoded by a
  small protobuf wire-format reader (``read_module``).  The field numbers come from
  ``xla/service/hlo.proto`` and ``xla/xla_data.proto`` (``_MODULE``, ``_COMPUTATION``,
  ``_INSTRUCTION``, ``_SHAPE``); ``tests/test_ex09_lowering.py`` checks them against the
  installed jaxlib (names and opcodes agree with the bindings' own ``HloInstruction``s).

The functions that take JAX objects run where JAX is: in the clean worker, through the
probes of exercises 9 and 10 (``grader/exercises/ex09_lowering/probes.py``, ``ex10_fusion.py``).
This module imports nothing of JAX itself; what it returns is plain data or frozen
dataclasses of plain data.  Version-sensitive: the protobuf field numbers and the two
accessors ``hlo_module``/``optimized_module`` (``compiler_ir("hlo")``,
``runtime_executable().hlo_modules()``), tested against the installed jaxlib.
"""

from __future__ import annotations

import dataclasses

from grader.ir import tally

# --- protobuf field numbers (xla/service/hlo.proto, xla/xla_data.proto) -------------------
_MODULE = {"name": 1, "entry_computation_name": 2, "computations": 3, "entry_computation_id": 6}
_COMPUTATION = {"name": 1, "instructions": 2, "id": 5, "root_id": 6}
_INSTRUCTION = {"name": 1, "opcode": 2, "shape": 3, "fusion_kind": 11, "id": 35, "operand_ids": 36,
                "called_computation_ids": 38}
_SHAPE = {"element_type": 2, "dimensions": 3, "tuple_shapes": 4}
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _fields(buf: bytes):
    """(field number, wire type, value) for each field of one message; a length-delimited
    value is the raw bytes, a varint an int.  Groups (wire types 3/4) are not used by XLA."""
    i, end = 0, len(buf)
    while i < end:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _I64:
            value, i = buf[i:i + 8], i + 8
        elif wire == _LEN:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == _I32:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _ints(wire: int, value) -> list[int]:
    """A repeated int64 field: packed (one length-delimited run) or one varint per entry."""
    if wire == _VARINT:
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    id: int
    operand_ids: tuple[int, ...]
    called_ids: tuple[int, ...]
    fusion_kind: str  # "kLoop", "kCustom", ...; "" for anything but a fusion
    dims: tuple[int, ...] | None  # the result's dimensions; None for a tuple-shaped result


@dataclasses.dataclass(frozen=True)
class Computation:
    name: str
    id: int
    instructions: tuple[Instruction, ...]


@dataclasses.dataclass(frozen=True)
class Module:
    name: str
    entry_id: int
    computations: tuple[Computation, ...]

    def entry(self) -> Computation:
        return next(c for c in self.computations if c.id == self.entry_id)

    def computation(self, cid: int) -> Computation:
        return next(c for c in self.computations if c.id == cid)

    def instructions(self):
        for comp in self.computations:
            yield from comp.instructions

    def instruction(self, iid: int) -> Instruction:
        return next(i for i in self.instructions() if i.id == iid)

    def opcode_counts(self, entry_only: bool = False) -> dict[str, int]:
        """Instructions by opcode: of the ENTRY computation, or of every computation."""
        source = self.entry().instructions if entry_only else self.instructions()
        return tally(i.opcode for i in source)

    def fused_computation_ids(self) -> set[int]:
        return {i.called_ids[0] for i in self.instructions() if i.opcode == "fusion" and i.called_ids}

    def fusions(self) -> list[dict]:
        """Every fusion instruction, in any computation: its name, kind, and the opcodes of
        the computation it calls (that computation's own instructions, parameters included;
        a computation *that* one calls, such as a reduce's ``to_apply``, is not part of it)."""
        out = []
        for inst in self.instructions():
            if inst.opcode == "fusion":
                called = self.computation(inst.called_ids[0])
                out.append({"name": inst.name, "kind": inst.fusion_kind,
                            "opcodes": tally(i.opcode for i in called.instructions)})
        return out


def _shape_dims(buf: bytes) -> tuple[int, ...] | None:
    dims, is_tuple = [], False
    for number, wire, value in _fields(buf):
        if number == _SHAPE["dimensions"]:
            dims += [_signed(v) for v in _ints(wire, value)]
        elif number == _SHAPE["tuple_shapes"]:
            is_tuple = True
    return None if is_tuple else tuple(dims)


def _instruction(buf: bytes) -> Instruction:
    f = {"name": "", "opcode": "", "id": 0, "operand_ids": [], "called_ids": [], "fusion_kind": "", "dims": ()}
    for number, wire, value in _fields(buf):
        if number == _INSTRUCTION["name"]:
            f["name"] = bytes(value).decode()
        elif number == _INSTRUCTION["opcode"]:
            f["opcode"] = bytes(value).decode()
        elif number == _INSTRUCTION["fusion_kind"]:
            f["fusion_kind"] = bytes(value).decode()
        elif number == _INSTRUCTION["shape"]:
            f["dims"] = _shape_dims(value)
        elif number == _INSTRUCTION["id"]:
            f["id"] = value
        elif number == _INSTRUCTION["operand_ids"]:
            f["operand_ids"] += _ints(wire, value)
        elif number == _INSTRUCTION["called_computation_ids"]:
            f["called_ids"] += _ints(wire, value)
    return Instruction(name=f["name"], opcode=f["opcode"], id=f["id"], operand_ids=tuple(f["operand_ids"]),
                       called_ids=tuple(f["called_ids"]), fusion_kind=f["fusion_kind"], dims=f["dims"])


def _computation(buf: bytes) -> Computation:
    name, cid, instructions = "", 0, []
    for number, _, value in _fields(buf):
        if number == _COMPUTATION["name"]:
            name = bytes(value).decode()
        elif number == _COMPUTATION["id"]:
            cid = value
        elif number == _COMPUTATION["instructions"]:
            instructions.append(_instruction(value))
    return Computation(name=name, id=cid, instructions=tuple(instructions))


def read_module(proto: bytes) -> Module:
    """A serialized ``HloModuleProto`` as a ``Module``."""
    name, entry_id, entry_name, comps = "", None, "", []
    for number, _, value in _fields(bytes(proto)):
        if number == _MODULE["name"]:
            name = bytes(value).decode()
        elif number == _MODULE["entry_computation_name"]:
            entry_name = bytes(value).decode()
        elif number == _MODULE["entry_computation_id"]:
            entry_id = value
        elif number == _MODULE["computations"]:
            comps.append(_computation(value))
    if entry_id is None:
        entry_id = next(c.id for c in comps if c.name == entry_name)
    return Module(name=name, entry_id=entry_id, computations=tuple(comps))


# --- from JAX objects (run where JAX is) ------------------------------------------------------

def hlo_module(lowered) -> Module:
    """The HLO module of ``jax.jit(f).lower(...)`` as JAX hands it to XLA (before XLA's passes)."""
    return read_module(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())


def optimized_module(compiled) -> Module:
    """The optimized HLO module of ``lowered.compile()`` (what ``compiled.as_text()`` prints)."""
    modules = compiled.runtime_executable().hlo_modules()
    if len(modules) != 1:
        raise ValueError(f"expected one HLO module in the executable, found {len(modules)}")
    return read_module(modules[0].as_serialized_hlo_module_proto())


def stablehlo_op_counts(lowered, dialects=("stablehlo", "chlo")) -> dict[str, int]:
    """Operations of the lowered StableHLO module by full name (``stablehlo.add``,
    ``chlo.erf``), at every depth, restricted to ``dialects``: each operation counts once,
    where it is written (a private function called twice counts once)."""
    names = []
    stack = [lowered.compiler_ir("stablehlo").operation]
    while stack:
        op = stack.pop()
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    if inner.name.split(".", 1)[0] in dialects:
                        names.append(inner.name)
                    stack.append(inner)
    return tally(names)


# --- the one thing the structure does not keep: print order --------------------------------

def entry_names_after_root(text: str) -> list[str]:
    """The names of the instructions ``compiled.as_text()`` prints after ENTRY's ROOT line.

    XLA schedules a side effect (a ``jax.debug.print``'s custom-call, and what only it
    reads) after the ROOT instruction; the proto keeps the instructions in another order, so
    only the printed text shows it.  The grader reads it for one purpose: to prove a drawn
    module really shows a reader that stops at ROOT (and to name that mistake).  Counts are
    never taken from here."""
    return names_after_root(text, entry_only=True)


def names_after_root(text: str, entry_only: bool = False) -> list[str]:
    """The names of the instructions an HLO module's text prints after the ROOT line of their
    computation (of ENTRY alone with ``entry_only``).  Before XLA's passes too, a side effect
    whose result nothing returns (a ``jax.debug.print`` of the last value computed) is printed
    after ROOT: a reader that stops at ROOT misses it."""
    names, inside, root_seen = [], False, False
    for line in text.splitlines():
        stripped = line.strip()
        if line.endswith("{") and not line.startswith((" ", "\t")) and not line.startswith("HloModule"):
            inside = line.startswith("ENTRY ") or not entry_only
            root_seen = False
        elif inside and stripped == "}":
            inside = False
        elif inside and stripped.startswith("ROOT "):
            root_seen = True
        elif inside and root_seen and " = " in stripped:
            names.append(stripped.split(" = ", 1)[0].lstrip("%"))
    return names
