"""Callgrind's client request to switch collection on and off, for scripts that count only a
part of what they run (start them with `--collect-atstart=no`)."""

import ctypes
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path


def toggler() -> Callable[[], None]:
    """`CALLGRIND_TOGGLE_COLLECT`, from a tiny library compiled here with the system's C
    compiler and valgrind's header."""
    folder = Path(tempfile.mkdtemp())
    (folder / "t.c").write_text(
        "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"
    )
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", str(folder / "t.so"), str(folder / "t.c")],
        check=True,
    )
    return ctypes.CDLL(str(folder / "t.so")).toggle  # type: ignore[no-any-return]
