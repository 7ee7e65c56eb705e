"""Numbers as a person reads them: ``70.5 us``, ``8.08 uJ``, ``1.5 KiB``, ``14.7 %``.

Three significant digits (an architect compares figures, not digits), units scaled so that
the number sits between 1 and 1000, ASCII unit names (``us``, not the micro sign, so that
the text greps and copies the same everywhere). Exact values stay in summary.json.
"""

from __future__ import annotations


def human_bytes(count: float) -> str:
    """``1536`` -> ``1.5 KiB``: binary units, three significant digits."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} GiB"  # pragma: no cover


def _scaled(value: float, steps: tuple[tuple[float, str], ...]) -> str:
    """``value`` in the largest of ``steps`` (scale, unit; largest first) it reaches, else in
    the smallest."""
    scale, unit = next((step for step in steps if abs(value) >= step[0]), steps[-1])
    return f"{_three(value / scale)} {unit}".rstrip()


def _three(value: float) -> str:
    """Three significant digits, no exponent for what a unit brings below 1000."""
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def duration(seconds: float) -> str:
    """``7.0516e-05`` -> ``70.5 us`` (ns, us, ms or s)."""
    return _scaled(seconds, ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")))


def energy(picojoules: float) -> str:
    """``8077985.72`` -> ``8.08 uJ`` (pJ, nJ, uJ, mJ or J)."""
    return _scaled(picojoules, ((1e12, "J"), (1e9, "mJ"), (1e6, "uJ"), (1e3, "nJ"), (1.0, "pJ")))


def per_second(rate: float, what: str = "/s") -> str:
    """``14181.2`` -> ``14.2 k/s``: a rate with an SI prefix."""
    return _scaled(rate, ((1e9, f"G{what}"), (1e6, f"M{what}"), (1e3, f"k{what}"), (1.0, what)))


def si(count: float) -> str:
    """``2656768`` -> ``2.66 M``: a count with an SI prefix (``""`` below 1000)."""
    return _scaled(count, ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")))


def percent(fraction: float) -> str:
    """``0.14717`` -> ``14.7 %``."""
    return f"{100 * fraction:.3g} %" if 0 < abs(fraction) < 0.001 else f"{100 * fraction:.1f} %"


def cycles(count: int) -> str:
    """``70516`` -> ``70,516`` (cycles are exact; separators make them readable)."""
    return f"{count:,}"


def ratio(b: float, a: float) -> str:
    """``B/A`` to three digits (``-`` when A is zero)."""
    if not a:
        return "-"
    return f"{b / a:.3g}x"
