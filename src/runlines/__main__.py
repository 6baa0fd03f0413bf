"""``python -m runlines``: the runlines command line."""

from __future__ import annotations

from runlines.cli import main

raise SystemExit(main())
