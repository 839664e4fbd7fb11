"""x86-64 machine code from an ELF object file (XLA:CPU's ``obj-file.<kernel>_kernel_module.o``),
disassembled to Intel-syntax text for a reader: each function under its label, one instruction
a line (``  offset:  mnemonic operands``), a relocated operand annotated with its symbol.

Capstone decodes the instructions and pyelftools reads the sections, symbols and relocations:
both are maintained pip packages (a plain ``pip install`` sets them up, nothing for the
machine's administrator), and measured side by side with binutils' ``objdump`` on the five
kernels of softmax_layernorm they were faster (7.5 ms against 13.1 ms, one process less per
object; docs/code.md). Object files come from a user's dump as well as from our compiles:
everything here is bounded, and a damaged file is one ``ExplorerError`` line.
"""

from __future__ import annotations

import io
import struct

# imported with the module, so a worker started ahead of its job has paid for them (pyelftools'
# import is most of a small program's first disassembly)
try:
    from capstone import CS_ARCH_X86, CS_MODE_64, CS_OPT_SYNTAX_INTEL, Cs, CsError
    from elftools.common.exceptions import ELFError
    from elftools.construct import ConstructError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
except ImportError as e:  # an environment set up before they were dependencies: no assembly, said so
    MISSING = f"{e.name} is not installed (pip install -e . installs capstone and pyelftools)"
else:
    MISSING = None
    # What a damaged object makes pyelftools and capstone raise (tests/codegen/test_disassemble.py
    # damages real objects to find it): their own errors; offsets and sizes past what Python
    # can seek or allocate (OverflowError, MemoryError); entries past a table's end (IndexError,
    # KeyError, struct.error, EOFError); names that do not decode (UnicodeDecodeError, a
    # ValueError); pyelftools' asserts and its NotImplementedError for what it cannot read, and
    # a recursion a crafted chain of links makes (RuntimeError).
    DAMAGED = (ELFError, ConstructError, CsError, ArithmeticError, LookupError, ValueError, TypeError,
               AttributeError, AssertionError, RuntimeError, struct.error, EOFError, OSError, MemoryError)

from analysis.errors import ExplorerError

MAX_OBJECT_BYTES = 32 * 1024 * 1024
MAX_INSTRUCTIONS = 200_000  # far past what a bundle keeps (analysis.codegen.kernel_code.MAX_CODE_LINES): a bound on time
_SHF_EXECINSTR = 0x4


def disassemble(data: bytes, file: str = "object file") -> str:
    """The x86-64 code of the executable sections of the ELF object ``data``, as text."""
    if MISSING:
        raise ExplorerError("code", f"not disassembled: {MISSING}", file)
    if len(data) > MAX_OBJECT_BYTES:
        raise ExplorerError("code", f"object file of {len(data):,} bytes (at most {MAX_OBJECT_BYTES:,})", file)
    if not data.startswith(b"\x7fELF"):
        raise ExplorerError("code", "not an ELF object file (damaged?)", file)
    try:
        elf = ELFFile(io.BytesIO(data))
        if elf["e_machine"] != "EM_X86_64":
            raise ExplorerError("code", f"an object file for {elf['e_machine']}, not x86-64", file)
        sections = list(elf.iter_sections())
        symtab = elf.get_section_by_name(".symtab")
        labels: dict[int, dict[int, str]] = {}  # section index -> offset -> function name
        symbols = list(symtab.iter_symbols()) if symtab is not None else []
        for sym in symbols:
            if sym["st_info"]["type"] == "STT_FUNC" and isinstance(sym["st_shndx"], int) and sym.name:
                labels.setdefault(sym["st_shndx"], {})[sym["st_value"]] = sym.name
        relocs: dict[int, dict[int, str]] = {}  # section index -> offset -> "symbol+addend"
        for sec in sections:
            if isinstance(sec, RelocationSection) and sec["sh_info"] and symtab is not None:
                table = relocs.setdefault(sec["sh_info"], {})
                for r in sec.iter_relocations():
                    table[r["r_offset"]] = _reloc_name(elf, symtab, r)
        md = Cs(CS_ARCH_X86, CS_MODE_64)
        md.syntax = CS_OPT_SYNTAX_INTEL
        out, count = [], 0
        for index, sec in enumerate(sections):
            if not (sec["sh_flags"] & _SHF_EXECINSTR) or sec["sh_size"] == 0 or sec["sh_type"] != "SHT_PROGBITS":
                continue
            names, rel = labels.get(index, {}), relocs.get(index, {})
            out.append(f"; section {sec.name}")
            for address, size, mnemonic, op_str in md.disasm_lite(sec.data(), 0):  # tuples: no object per instruction
                if address in names:
                    out.append(f"{names[address]}:")
                note = next((rel[o] for o in range(address, address + size) if o in rel), None) if rel else None
                out.append(f"  {address:x}:\t{mnemonic} {op_str}".rstrip() + (f"\t; {note}" if note else ""))
                count += 1
                if count >= MAX_INSTRUCTIONS:
                    out.append(f"; … disassembly stopped at {MAX_INSTRUCTIONS:,} instructions")
                    return "\n".join(out) + "\n"
        return "\n".join(out) + "\n"
    except ExplorerError:
        raise
    except DAMAGED as e:  # one line naming the file; the view shows the kernel's other stages
        raise ExplorerError("code", f"damaged object file: {type(e).__name__}: {str(e)[:200] or 'no detail'}",
                            file) from None


def _reloc_name(elf, symtab, r) -> str:
    sym = symtab.get_symbol(r["r_info_sym"])
    name = sym.name
    if not name and sym["st_info"]["type"] == "STT_SECTION" and isinstance(sym["st_shndx"], int):
        name = elf.get_section(sym["st_shndx"]).name
    addend = r["r_addend"] if r.is_RELA() else 0
    return f"{name or '?'}" + (f"+{addend:#x}" if addend > 0 else f"-{-addend:#x}" if addend < 0 else "")
