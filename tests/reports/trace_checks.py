"""A structural validator for Chrome trace-event JSON, as Perfetto's JSON importer reads it.

Checks what makes Perfetto reject or misdraw a trace: the top-level object,
event types and their required keys, numeric non-negative times, complete
events of one track properly nested or disjoint (in whole nanoseconds, Perfetto's
unit) and sorted, counters with numeric values, names for every track used.
"""

from __future__ import annotations

import json
from collections import defaultdict
from numbers import Real

METADATA_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def _ns(value: float) -> int:
    return round(value * 1000)


def check_trace_document(doc: object) -> dict[tuple[int, int], str]:
    """Raise AssertionError on the first problem; return ``{(pid, tid): thread name}``."""
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN/Infinity
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
    thread_names: dict[tuple[int, int], str] = {}
    process_names: dict[int, str] = {}
    slices: dict[tuple[int, int], list[dict]] = defaultdict(list)
    counters: dict[tuple[int, str], list[float]] = defaultdict(list)
    for event in doc["traceEvents"]:
        assert isinstance(event, dict), event
        ph = event.get("ph")
        assert ph in ("X", "M", "C"), event
        assert isinstance(event.get("name"), str) and event["name"], event
        assert isinstance(event.get("pid"), int), event
        if ph == "M":
            assert event["name"] in METADATA_NAMES, event
            args = event["args"]
            if event["name"].endswith("_name"):
                assert isinstance(args["name"], str) and args["name"], event
                if event["name"] == "thread_name":
                    key = (event["pid"], event["tid"])
                    assert key not in thread_names, f"thread {key} named twice"
                    thread_names[key] = args["name"]
                else:
                    process_names[event["pid"]] = args["name"]
            else:
                assert isinstance(args["sort_index"], int), event
        elif ph == "X":
            assert isinstance(event.get("tid"), int), event
            for key in ("ts", "dur"):
                assert isinstance(event[key], Real) and not isinstance(event[key], bool), event
                assert event[key] >= 0, event
            assert isinstance(event.get("args", {}), dict), event
            slices[(event["pid"], event["tid"])].append(event)
        else:
            assert isinstance(event["ts"], Real) and event["ts"] >= 0, event
            assert event["args"] and all(isinstance(v, Real) for v in event["args"].values()), event
            counters[(event["pid"], event["name"])].append(event["ts"])
    for track, events in slices.items():
        assert track in thread_names, f"track {track} has slices but no thread_name"
        assert track[0] in process_names, f"process {track[0]} has no process_name"
        stack: list[int] = []  # end times (ns) of the open enclosing slices
        last_start = -1
        for e in events:
            start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
            assert start >= last_start, f"track {thread_names[track]}: slices not sorted at {e}"
            last_start = start
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], \
                f"track {thread_names[track]}: {e['name']} overlaps an earlier slice without nesting"
            stack.append(end)
    for key, times in counters.items():
        assert times == sorted(times), f"counter {key} not in time order"
    return thread_names
