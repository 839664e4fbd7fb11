"""Import an XLA dump folder (the ``--xla_dump_to`` output of any machine, zipped) as Bundles.

XLA names its dump files after the module (``NNNN`` is the module's unique id)::

    module_NNNN.NAME.before_optimizations.txt                 HLO as handed to XLA
    module_NNNN.NAME.[TAG_]<platform>_after_optimizations.txt   the optimized HLO
        (cpu_after_optimizations, gpu_after_optimizations, sm_9.0_gpu_after_optimizations,
         tpu_after_optimizations, ...; ``-buffer-assignment``/``-memory-usage-report`` companions
         are skipped)
    module_NNNN.NAME.NNNN.<pipeline>.after_<pass>[.before_<nextpass>].txt
        a snapshot after a pass that changed the module (``xla_dump_hlo_pass_re=.*``)

``bundles_from_dump_zip(data, name)`` reads the zip in memory (nothing is extracted to disk)
and returns one Bundle per module, the most interesting first, with ``hlo_before``/``hlo_after``
and the ``pass_log`` (docs/bundle.md), and for XLA:CPU the kernels' generated code (their
``.ll`` and ``.o`` files, ``analysis.codegen.cpu_read``). Hostile input is refused with an ``ExplorerError`` of
phase ``load``: not a zip, too many files, too much uncompressed data (zip bombs), no HLO.
Member names are only ever matched, never used as paths, so ``..`` or absolute names are
harmless (they are reported by their base name).
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass, field

from analysis import linear_re
from analysis.bundle.core import Bundle, analyze, bundle_from_hlo
from analysis.codegen.gpu_read import gpu_code_from_files, is_gpu_code_file
from analysis.codegen.cpu_read import MAX_IR_BYTES, code_file, code_from_files
from analysis.codegen.disassemble import MAX_OBJECT_BYTES
from analysis.errors import ExplorerError
from analysis.fusion.decisions import from_texts
from analysis.program.memory import BUFFER_ASSIGNMENT_SUFFIX, LIVE_RANGE_SUFFIX, bundle_memory

FUSION_DUMP_SUFFIX = "priority_fusion_dump.txt"  # what XLA:GPU names its fusion process dump

MAX_MEMBERS = 20_000  # entries in the zip
MAX_TOTAL_BYTES = 200 * 2 ** 20  # uncompressed bytes read, all members together
# uncompressed bytes of the texts parsed into bundles (HLO, buffer assignments, fusion dumps), all
# modules together: what one upload of HLO text may be (the app passes its upload limit). A zip
# deflates HLO twelvefold, so a 4 MB zip held 50 MB of HLO to parse (+580 MB for the server).
MAX_PARSED_MB = 32
MAX_PASS_TEXT_BYTES = 20 * 2 ** 20  # per module: keep snapshot texts in pass_log up to this total
MAX_MODULES = 64  # bundles returned (the most interesting)

# A zip's member names are a user's: RE2 patterns (``analysis.linear_re``), linear in a name's
# length whatever it holds (the lazy parts here backtrack under ``re``).
MODULE_FILE = linear_re.compile(r"^module_(\d+)\.(.+)$")
BEFORE_FILE = linear_re.compile(r"^(?P<name>.+)\.before_optimizations\.txt$")
AFTER_FILE = linear_re.compile(r"^(?P<name>.+?)\.(?:(?P<tag>[^.]*?(?:\.\d+)?[^.]*?)_)?after_optimizations\.txt$")
PASS_FILE = linear_re.compile(r"^(?P<name>.+?)\.(?P<index>\d{4,})\.(?P<pipeline>[^.]+)\.after_(?P<pass>.+?)"
                              r"(?:\.before_(?P<next>.+?))?\.txt$")
_PLATFORMS = ("cpu", "gpu", "tpu", "rocm", "cuda")


@dataclass
class _Module:
    key: tuple[str, str]  # (folder in the zip, module id)
    name: str = ""
    before: tuple[str, str] | None = None  # (file, text)
    after: tuple[str, str] | None = None
    platform: str | None = None
    passes: list[dict] = field(default_factory=list)
    buffers: dict = field(default_factory=dict)  # 'buffer-assignment' / 'live-range' -> (file, text)
    fusion_dumps: list = field(default_factory=list)  # priority fusion process dumps (texts)
    code_files: dict = field(default_factory=dict)  # the kernels' IR, objects, PTX: base name -> bytes


def _platform_of(tag: str | None) -> str | None:
    if not tag:
        return None
    t = tag.lower()
    for p in _PLATFORMS:
        if t == p or t.endswith("_" + p) or t.endswith(p):
            return {"cuda": "gpu", "rocm": "gpu"}.get(p, p)
    return None


class _Reader:
    """Reads members of a zip in memory, counting every byte against one budget."""

    def __init__(self, zf: zipfile.ZipFile, zip_name: str, budget: int, parsed_mb: int = MAX_PARSED_MB):
        self.zf, self.zip_name, self.left = zf, zip_name, budget
        self.parsed_mb, self.parse_left = parsed_mb, parsed_mb << 20

    def read(self, info: zipfile.ZipInfo, parsed: bool = True) -> str:
        """A member's text; ``parsed``: it is to be parsed, so it counts against the parse budget too."""
        if parsed:
            if info.file_size > self.parse_left:
                raise self._too_much_to_parse()
            text = self._read(info)
            self.parse_left -= len(text)
            if self.parse_left < 0:
                raise self._too_much_to_parse()
            return text
        return self._read(info)

    def _too_much_to_parse(self) -> ExplorerError:
        return ExplorerError("load", f"the dump's HLO and buffer texts are more than {self.parsed_mb} MB uncompressed, "
                                     f"larger than the upload limit ({self.parsed_mb} MB; setting upload_mb): "
                                     "zip only the module you want", self.zip_name)

    def read_bytes(self, info: zipfile.ZipInfo) -> bytes:
        """A member's bytes (an object file), counted against the budget."""
        return self._read(info, decode=False)

    def _read(self, info: zipfile.ZipInfo, decode: bool = True):
        # Declared sizes can lie: read in chunks and stop at the budget whatever the header says.
        if info.file_size > self.left:
            raise self._too_big()
        chunks, n = [], 0
        try:
            with self.zf.open(info) as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    n += len(chunk)
                    if n > self.left:
                        raise self._too_big()
                    chunks.append(chunk)
        except ExplorerError:
            raise
        except Exception as e:  # noqa: BLE001 - damaged (zlib/lzma errors, bad CRC), encrypted, unsupported
            raise ExplorerError("load", f"cannot read {posixpath.basename(info.filename)!r} in the zip: "
                                        f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                                self.zip_name) from None
        self.left -= n
        data = b"".join(chunks)
        if not decode:
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("latin-1")

    def _too_big(self) -> ExplorerError:
        return ExplorerError("load", f"the dump is larger than {MAX_TOTAL_BYTES // 2 ** 20} MiB uncompressed "
                                     "(a zip bomb, or too big to import): zip only the module you want",
                             self.zip_name)


def _open_zip(data: bytes, name: str) -> zipfile.ZipFile:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ExplorerError("load", "a dump must be given as the bytes of a zip file", name)
    if not data:
        raise ExplorerError("load", "the file is empty", name)
    try:
        return zipfile.ZipFile(io.BytesIO(bytes(data)))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, NotImplementedError) as e:
        raise ExplorerError("load", f"not a zip file ({str(e).splitlines()[0] if str(e) else 'unreadable'})",
                            name) from None


def scan(data: bytes, name: str = "dump.zip", keep_pass_texts: bool | None = None,
         parsed_mb: int = MAX_PARSED_MB) -> list[_Module]:
    """The modules of a zipped dump, with their texts read (pass texts only if they fit; the
    texts to parse at most ``parsed_mb`` MB together)."""
    zf = _open_zip(data, name)
    with zf:
        try:
            infos = zf.infolist()
        except (zipfile.BadZipFile, ValueError, OSError) as e:
            raise ExplorerError("load", f"damaged zip: {e}", name) from None
        if not infos:
            raise ExplorerError("load", "the zip is empty", name)
        if len(infos) > MAX_MEMBERS:
            raise ExplorerError("load", f"the zip holds {len(infos):,} entries (at most {MAX_MEMBERS:,})", name)
        reader = _Reader(zf, name, MAX_TOTAL_BYTES, parsed_mb)
        modules: dict[tuple[str, str], _Module] = {}
        pass_infos: dict[tuple[str, str], list[tuple[dict, zipfile.ZipInfo]]] = {}
        for info in infos:
            if info.is_dir():
                continue
            path = info.filename.replace("\\", "/")
            folder, base = posixpath.split(path)
            m = MODULE_FILE.match(base)
            if m and (code_file(base) or is_gpu_code_file(base)):  # a kernel's code (code_read, code_gpu_read)
                modules.setdefault((folder, m.group(1)), _Module((folder, m.group(1)))).code_files[base] = info
                continue
            if not m or not base.endswith(".txt"):
                continue
            key = (folder, m.group(1))
            rest = m.group(2)
            mod = modules.setdefault(key, _Module(key))
            if rest.endswith(FUSION_DUMP_SUFFIX):  # XLA:GPU priority fusion's process dump (analysis.fusion.decisions)
                mod.fusion_dumps.append(reader.read(info))
                continue
            if rest.endswith((BUFFER_ASSIGNMENT_SUFFIX, LIVE_RANGE_SUFFIX)):  # analysis.program.memory reads them
                mod.buffers["live-range" if rest.endswith(LIVE_RANGE_SUFFIX) else "buffer-assignment"] = (
                    base, reader.read(info))
                continue
            # (groups by number, as the patterns list them: google-re2 looks a name up slowly)
            p = PASS_FILE.match(rest) if ".after_" in rest else None
            if p:
                name, index, pipeline, pass_name, next_pass = p.groups()
                entry = {"index": int(index), "pipeline": pipeline, "pass": pass_name, "next_pass": next_pass,
                         "file": base}
                pass_infos.setdefault(key, []).append((entry, info))
                mod.name = mod.name or name
                continue
            b = BEFORE_FILE.match(rest) if rest.endswith(".before_optimizations.txt") else None
            if b:
                mod.name = b.group(1)
                mod.before = (base, reader.read(info))
                continue
            a = AFTER_FILE.match(rest) if rest.endswith("after_optimizations.txt") else None
            if a:
                mod.name = mod.name or a.group(1)
                mod.after = (base, reader.read(info))
                mod.platform = _platform_of(a.group(2))
        for mod in modules.values():  # read while the zip is open, each file within its bound
            for base, info in list(mod.code_files.items()):
                limit = MAX_OBJECT_BYTES if base.endswith(".o") else MAX_IR_BYTES
                try:
                    mod.code_files[base] = (reader.read_bytes(info) if info.file_size <= limit
                                            else ExplorerError("code", f"more than {limit:,} bytes", base))
                except ExplorerError as e:  # a damaged member: that stage is left out, and the note says why
                    if "larger than" in e.message:
                        raise
                    mod.code_files[base] = ExplorerError("code", e.message, base)
        for key, items in pass_infos.items():
            mod = modules[key]
            items.sort(key=lambda it: it[0]["index"])
            total = sum(it[1].file_size for it in items)
            keep = keep_pass_texts if keep_pass_texts is not None else total <= MAX_PASS_TEXT_BYTES
            for entry, info in items:
                if keep:
                    entry["text"] = reader.read(info, parsed=False)  # shown as text, never parsed
                mod.passes.append(entry)
            if not keep:
                for entry in mod.passes:
                    entry["text"] = None
    found = [m for m in modules.values() if m.before or m.after]
    if not found:
        what = "pass snapshots but no before/after-optimizations HLO" if modules else "no XLA dump files"
        raise ExplorerError("load", f"{what} in the zip (expected module_NNNN.NAME.before_optimizations.txt "
                                    "or module_NNNN.NAME.<platform>_after_optimizations.txt)", name)
    return found


def _interest(b: Bundle) -> tuple:
    """Sort key: more kernels and ops first, then the longer text."""
    m = b.metrics
    size = sum(len(t) for t in b.stages.values())
    return (-(m.get("kernels_after") or 0), -(m.get("compute_ops_before") or 0), -size)


def bundles_from_dump_zip(data: bytes, name: str = "dump.zip", parsed_mb: int = MAX_PARSED_MB) -> list[Bundle]:
    """One Bundle per module of a zipped XLA dump, the most interesting (most kernels) first.

    Each has ``stages`` ``hlo_before``/``hlo_after`` (what the dump holds), ``source.kind`` =
    ``"dump"`` and ``pass_log`` (``[]`` without per-pass snapshots; see docs/bundle.md). A
    module whose HLO does not parse is skipped; if none parses, the first error is raised. The
    texts parsed are at most ``parsed_mb`` MB together (the app's upload limit)."""
    modules = scan(data, name, parsed_mb=parsed_mb)
    out: list[Bundle] = []
    first_error: ExplorerError | None = None
    for mod in modules:
        main = mod.after or mod.before
        before_text = mod.before[1] if (mod.after and mod.before) else None
        try:
            b = bundle_from_hlo(main[1], mod.name or f"module_{mod.key[1]}", main[0], before_text=before_text)
        except ExplorerError as e:
            first_error = first_error or ExplorerError(e.phase, e.message, f"{name}:{main[0]}", e.line, e.column,
                                                       e.excerpt)
            continue
        except Exception as e:  # noqa: BLE001 - a module our analysis cannot handle: skip it
            first_error = first_error or ExplorerError("parse", f"{type(e).__name__}: {e}", f"{name}:{main[0]}")
            continue
        b.source.update({"kind": "dump", "file": f"{name}:{main[0]}", "zip": name, "module_id": mod.key[1],
                         "files": [f for f in (mod.before and mod.before[0], mod.after and mod.after[0]) if f]})
        b.environment["origin"] = "imported XLA dump"
        if mod.platform and mod.after and b.environment.get("platform") != mod.platform:
            b.environment["platform"] = b.environment["backend"] = mod.platform
            analyze(b)
        b.pass_log = mod.passes
        if "buffer-assignment" in mod.buffers and mod.after:
            ba, lr = mod.buffers["buffer-assignment"], mod.buffers.get("live-range")
            b.memory = bundle_memory(b, ba[1], lr[1] if lr else None, [ba[0]] + ([lr[0]] if lr else []))
        if mod.code_files and mod.after and b.platform == "cpu":
            b.code = code_from_files(list(mod.code_files), lambda n, limit, f=mod.code_files: _code_bytes(f[n], limit), b)
        elif mod.code_files and mod.after and b.platform == "gpu":  # no tool is run on a user's PTX
            b.code = gpu_code_from_files(list(mod.code_files), lambda n, limit, f=mod.code_files: _code_bytes(f[n], limit),
                                         b, no_tools_note="ptxas and nvdisasm are not run on an imported dump's PTX")
        if mod.fusion_dumps and mod.after:
            b.fusion_decisions = from_texts(b.module("hlo_before"), b.module("hlo_after"), b.provenance,
                                            b.platform, None, mod.fusion_dumps, {"origin": "imported XLA dump"})
        out.append(b)
    if not out:
        raise first_error or ExplorerError("load", "no module of the dump could be read", name)
    out.sort(key=_interest)
    return out[:MAX_MODULES]


def _code_bytes(got, limit: int) -> bytes:
    if isinstance(got, ExplorerError):
        raise got
    if len(got) > limit:
        raise ExplorerError("code", f"more than {limit:,} bytes")
    return got


def pass_text(bundle: Bundle, index: int) -> str | None:
    """The HLO snapshot after pass ``index`` of a dump bundle's pass log, if it was kept."""
    for p in bundle.pass_log or []:
        if isinstance(p, dict) and p.get("index") == index:
            return p.get("text")
    return None
