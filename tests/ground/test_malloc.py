"""The server's allocator settings (analysis.tuning.tune_allocator): a multi-megabyte block goes back to
the system when freed, even after a bigger one raised glibc's own threshold. Each case runs in a
fresh process (the settings are process-wide); glibc's counters say which blocks are mapped."""

import ctypes.util
import subprocess
import sys
import textwrap

import pytest

ROOT = __file__.rsplit("/tests/", 1)[0]

CASE = textwrap.dedent("""
    import ctypes, sys
    sys.path.insert(0, %r)

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                    "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Info
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(16 << 20))  # a 16 MiB block, mapped and freed: glibc's threshold follows it
    if sys.argv[1] == "tuned":
        from analysis.tuning import tune_allocator
        assert tune_allocator()
    before = libc.mallinfo2().hblks
    p = libc.malloc(2 << 20)  # a 2 MiB block: mapped on its own, or carved out of the heap
    print(libc.mallinfo2().hblks - before)
    libc.free(p)
""") % ROOT


def _mapped_blocks(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CASE, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.mark.skipif(not (ctypes.util.find_library("c") or "").startswith("libc.so"), reason="glibc only")
def test_after_a_big_block_a_2_mib_block_is_mapped_only_when_tuned():
    assert _mapped_blocks("plain") == 0  # glibc's default: from the heap (where holes stay)
    assert _mapped_blocks("tuned") == 1  # tuned: mapped, so freeing it hands it back
