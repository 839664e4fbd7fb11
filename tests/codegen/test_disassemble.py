"""Damaged object files (analysis.codegen.disassemble): real XLA:CPU objects from a jax compile, cut short,
with bytes flipped and header fields overwritten (section table offsets and counts, section sizes,
offsets, links and entry sizes, with huge values), by a small seeded fuzzer of our own. Each one
disassembles to text or is one ExplorerError line naming the file, never another exception; and in
an imported dump zip the damaged kernel's machine code is left out, said so, and the other
kernels' code is all there."""

from __future__ import annotations

import io
import os
import random
import struct
import zipfile

import pytest

from analysis.codegen.finish import code_of
from analysis.errors import ExplorerError

jax = pytest.importorskip("jax")
pytest.importorskip("capstone")
pytest.importorskip("elftools")

# ELF64 little-endian: the header's fields and a section header's, (offset, struct format)
E_SHOFF, E_SHENTSIZE, E_SHNUM, E_SHSTRNDX = (0x28, "<Q"), (0x3A, "<H"), (0x3C, "<H"), (0x3E, "<H")
HEADER_FIELDS = [E_SHOFF, E_SHENTSIZE, E_SHNUM, E_SHSTRNDX, (0x20, "<Q"), (0x12, "<H"), (0x04, "<B"), (0x05, "<B")]
SH_TYPE, SH_FLAGS, SH_OFFSET, SH_SIZE = (0x04, "<I"), (0x08, "<Q"), (0x18, "<Q"), (0x20, "<Q")
SH_LINK, SH_INFO, SH_ENTSIZE = (0x28, "<I"), (0x2C, "<I"), (0x38, "<Q")
SECTION_FIELDS = [SH_TYPE, SH_FLAGS, SH_OFFSET, SH_SIZE, SH_LINK, SH_INFO, SH_ENTSIZE, (0x00, "<I")]
HUGE = [2 ** 64 - 1, 2 ** 63 - 1, 2 ** 63, 2 ** 32 - 1, 2 ** 31, 10 ** 12, 0xFFFF, 0, 1, 7]
CASES = 400


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> dict[str, bytes]:
    """The files XLA:CPU dumps for a small program with several kernels."""
    import jax.numpy as jnp

    folder = tmp_path_factory.mktemp("dump")

    def f(x, y):
        return jnp.tanh(x * y + 1.0).sum(axis=0) + jnp.exp(x).max()

    x = jnp.ones((64, 32))
    jax.jit(f).lower(x, x).compile(compiler_options={"xla_dump_to": str(folder), "xla_dump_emitter_re": "llvm"})
    return {n: (folder / n).read_bytes() for n in os.listdir(folder)}


@pytest.fixture(scope="module")
def objects(dump) -> dict[str, bytes]:
    found = {n: data for n, data in dump.items() if n.endswith(".o")}
    assert len(found) >= 3 and all(data.startswith(b"\x7fELF\x02\x01") for data in found.values())
    return found


def _put(data: bytearray, at: int, field: tuple[int, str], value: int) -> None:
    offset, fmt = field
    if 0 <= at + offset and at + offset + struct.calcsize(fmt) <= len(data):
        struct.pack_into(fmt, data, at + offset, value & ((1 << (8 * struct.calcsize(fmt))) - 1))


def _section_at(data: bytes, index: int) -> int:
    return struct.unpack_from(E_SHOFF[1], data, E_SHOFF[0])[0] + index * struct.unpack_from("<H", data, 0x3A)[0]


def damaged(rnd: random.Random, data: bytes) -> tuple[bytes, str]:
    """One damaged copy of the object ``data`` and what was done to it."""
    b = bytearray(data)
    sections = struct.unpack_from(E_SHNUM[1], data, E_SHNUM[0])[0]
    how = rnd.randrange(6)
    if how == 0:
        cut = rnd.randrange(len(b))
        return bytes(b[:cut]), f"cut at {cut}"
    if how == 1:
        for _ in range(rnd.randint(1, 20)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b), "bytes flipped"
    if how == 2:
        field, value = rnd.choice(HEADER_FIELDS), rnd.choice(HUGE)
        _put(b, 0, field, value)
        return bytes(b), f"header field {field[0]:#x} = {value:#x}"
    # a section header's field (most of the damage goes here: it is where the readers index)
    index, field, value = rnd.randrange(sections), rnd.choice(SECTION_FIELDS), rnd.choice(HUGE)
    _put(b, _section_at(data, index), field, value)
    return bytes(b), f"section {index} field {field[0]:#x} = {value:#x}"


def test_every_damaged_object_disassembles_or_is_one_error_line(objects):
    from analysis.codegen.disassemble import disassemble

    rnd = random.Random(20261205)
    names = sorted(objects)
    outcomes = {"text": 0, "error": 0}
    for _ in range(CASES):
        name = rnd.choice(names)
        data, how = damaged(rnd, objects[name])
        try:
            text = disassemble(data, name)
        except ExplorerError as e:
            line = e.one_line()
            assert e.phase == "code" and name in line and "\n" not in line, (how, line)
            outcomes["error"] += 1
        except Exception as e:  # noqa: BLE001 - what this test is for
            pytest.fail(f"{name}, {how}: {type(e).__name__}: {e}")
        else:
            assert isinstance(text, str), how
            outcomes["text"] += 1
    assert outcomes["text"] > 0 and outcomes["error"] > 0  # the fuzzer reaches both


def _executable_section(data: bytes) -> int:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    return next(i for i, s in enumerate(elf.iter_sections()) if s["sh_flags"] & 0x4 and s["sh_size"])


@pytest.mark.parametrize("field, value", [(SH_OFFSET, 2 ** 64 - 1), (SH_SIZE, 2 ** 64 - 1), (SH_OFFSET, 2 ** 63)])
def test_a_code_section_past_any_offset_is_one_error_line(objects, field, value):
    from analysis.codegen.disassemble import disassemble

    name = sorted(objects)[0]
    data = bytearray(objects[name])
    _put(data, _section_at(data, _executable_section(objects[name])), field, value)
    with pytest.raises(ExplorerError) as e:
        disassemble(bytes(data), name)
    assert name in e.value.one_line() and "damaged object file" in e.value.one_line()


@pytest.mark.parametrize("field, value", [(E_SHOFF, 2 ** 64 - 1), (E_SHNUM, 0xFFFF), (E_SHENTSIZE, 0)])
def test_a_section_table_out_of_reach_is_one_error_line(objects, field, value):
    from analysis.codegen.disassemble import disassemble

    name = sorted(objects)[0]
    data = bytearray(objects[name])
    _put(data, 0, field, value)
    with pytest.raises(ExplorerError) as e:
        disassemble(bytes(data), name)
    assert name in e.value.one_line()


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_a_dump_zip_with_one_damaged_object_shows_the_other_kernels_code(dump, objects):
    from analysis.inputs.dump import bundles_from_dump_zip

    victim = sorted(objects)[0]
    files = dict(dump)
    data = bytearray(files[victim])
    _put(data, _section_at(data, _executable_section(files[victim])), SH_OFFSET, 2 ** 64 - 1)
    files[victim] = bytes(data)
    b = bundles_from_dump_zip(_zip(files), "dump.zip")[0]
    with_code = [k.name for k in b.kernels if k.name in b.code["kernels"]]
    assert len(with_code) >= 3
    finished = {n: code_of(b, n) for n in with_code}  # disassembled now: the damage is found here
    spoiled = [n for n, k in finished.items() if "asm" not in k.stages]
    assert len(spoiled) == 1
    k = finished[spoiled[0]]
    assert len(k.problems) == 1 and victim in k.problems[0] and "damaged object file" in k.problems[0]
    assert k.stages  # its IR is still shown
    for n, other in finished.items():
        if n != spoiled[0]:
            assert "asm" in other.stages and other.stages["asm"].strip() and not other.problems, n
