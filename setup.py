"""Build the optional C fast path of Run.log; without a C compiler runlines stays pure Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("runlines._speedups", ["src/runlines/_speedups.c"], optional=True),
    ]
)
