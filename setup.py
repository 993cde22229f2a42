"""Builds the Cython extensions in ``src/replica_core/_fast``.

Set ``REPLICA_CORE_ONLY=_crc,_batch`` to build a subset while developing one kernel.
"""
import os
import platform

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

FAST = "src/replica_core/_fast"
CFLAGS = ["-O3"]
if platform.machine() in ("x86_64", "AMD64"):
    # The CRC32 instruction is selected per function at run time; nothing here needs SSE4.2.
    CFLAGS.append("-mtune=generic")

EXTENSIONS = {
    "_crc": [f"{FAST}/_crc.pyx", f"{FAST}/crc32c_hw.c"],
    "_batch": [f"{FAST}/_batch.pyx", f"{FAST}/crc32c_hw.c"],
    "_index": [f"{FAST}/_index.pyx"],
    "_replica_state": [f"{FAST}/_replica_state.pyx"],
    "_fetch_order": [f"{FAST}/_fetch_order.pyx"],
    "_invariants": [f"{FAST}/_invariants.pyx"],
    "_segment_recovery": [f"{FAST}/_segment_recovery.pyx"],
}

only = {n.strip() for n in os.environ.get("REPLICA_CORE_ONLY", "").split(",") if n.strip()}
extensions = [
    Extension(
        f"replica_core._fast.{name}",
        sources=sources,
        include_dirs=[FAST, numpy.get_include()],
        extra_compile_args=CFLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name, sources in EXTENSIONS.items()
    if (not only or name in only) and os.path.exists(sources[0])
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
        include_path=[FAST],
    ),
)
