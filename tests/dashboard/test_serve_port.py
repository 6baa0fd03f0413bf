"""runlines.serve() refuses a port out of range before it binds anything."""

from __future__ import annotations

import pytest

import runlines


@pytest.mark.parametrize("port", [-1, 65536, 80000, True])
def test_serve_refuses_a_port_out_of_range_with_a_value_error_naming_the_range(port: int) -> None:
    with pytest.raises(ValueError, match=r"serve\(port=.*\) .* from 0 to 65535 \(0 picks a free"):
        runlines.serve(port=port)
