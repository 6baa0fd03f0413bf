"""The `runlines serve` command: the dashboard of runs in a browser (`runlines.serve`)."""

from __future__ import annotations

import argparse
from typing import Any

from runlines import dashboard
from runlines.cli._options import port


def add_commands(commands: Any) -> None:
    """Add `serve` to the CLI's subparsers *commands*."""
    sub = commands.add_parser("serve", help="a live dashboard of the runs in a browser")
    sub.add_argument("sources", nargs="*", metavar="SOURCE", help="logs or folders (default: .)")
    sub.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1: this machine only")
    sub.add_argument("--port", type=port, default=8000, help="default 8000; 0 picks a free one")
    sub.add_argument("--open", action="store_true", help="open the page in a browser")
    sub.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; return the exit status."""
    dashboard.serve(*args.sources, host=args.host, port=args.port, open_browser=args.open)
    return 0
