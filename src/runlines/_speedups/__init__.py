"""The C twin of `_writer.py` (`speedups.c`): Run.log and spans for the common records.

Optional: `runlines._native.speedups` is the built module, or None.
"""
