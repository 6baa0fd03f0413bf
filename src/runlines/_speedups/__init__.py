"""The C twin of the hot path (`speedups.c`): Run.log and spans for the common records.

Optional: `runlines._native.speedups` is the built module, or None.
"""
