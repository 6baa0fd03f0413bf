"""Build the optional C fast path of Run.log and spans; without it runlines is pure Python.

A missing compiler is no error (`optional=True`): the pure-Python paths run, with the same
results, and `runlines --version` says the fast path is off and why.
- It is built on POSIX only: it writes with POSIX write(2) (see src/runlines/_native.py).
- It is not built for a free-threaded Python: the C code relies on the GIL, and importing a
  module that does not declare otherwise would turn the GIL back on for the whole process.
"""

import os
import sysconfig

from setuptools import Extension, setup

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

extensions = []
if not FREE_THREADED and os.name == "posix":
    extensions.append(
        Extension(
            "runlines._speedups.speedups", ["src/runlines/_speedups/speedups.c"], optional=True
        )
    )

setup(ext_modules=extensions)
