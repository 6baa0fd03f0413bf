"""Build the optional C fast paths (Run.log, load); without a C compiler they stay Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "runlines._speedups.speedups", ["src/runlines/_speedups/speedups.c"], optional=True
        ),
    ]
)
