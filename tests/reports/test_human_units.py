"""reports.human_units: figures in the units a person reads."""

from __future__ import annotations

from reports.human_units import cycles, duration, energy, human_bytes, per_second, percent, ratio, si


def test_durations_pick_ns_us_ms_or_s():
    assert [duration(s) for s in (7.0516e-05, 0.00123, 2.5, 8.5e-7, 0.0, 3e-10, 1234.0)] == [
        "70.5 us", "1.23 ms", "2.5 s", "850 ns", "0 ns", "0.3 ns", "1,234 s"]


def test_energy_picks_pj_to_j():
    assert [energy(pj) for pj in (8077985.72, 1.2e9, 540.0, 850e3, 0.0, 3e12)] == [
        "8.08 uJ", "1.2 mJ", "540 pJ", "850 nJ", "0 pJ", "3 J"]


def test_rates_counts_shares_and_ratios():
    assert [per_second(r) for r in (14181.2, 734.0, 2.5e6)] == ["14.2 k/s", "734 /s", "2.5 M/s"]
    assert [si(n) for n in (2656768, 512, 1e9)] == ["2.66 M", "512", "1 G"]
    assert [percent(f) for f in (0.14717, 0.0004, 0.0, 1.0)] == ["14.7 %", "0.04 %", "0.0 %", "100.0 %"]
    assert (cycles(70516), ratio(3, 2), ratio(1, 0)) == ("70,516", "1.5x", "-")
    assert [human_bytes(n) for n in (0, 1023, 1536, 3 << 20)] == ["0 B", "1023 B", "1.5 KiB", "3 MiB"]
