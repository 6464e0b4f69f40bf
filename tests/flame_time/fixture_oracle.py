# SPDX-License-Identifier: MIT
"""What flame_time_fixture.cpp does, for the tests that trace it.

FUNCS: its traced functions. WANT: each stack it runs (main first) -> (calls, the ms it sleeps
there itself). SLACK_MS: how far over its sleeps a frame's own time may be (a sleep's overshoot on
a loaded machine), never under.
"""
SLACK_MS = 40
FUNCS = ["leaf_a", "leaf_b", "mid", "deep_throw", "thrower", "work", "main"]
WANT = {
    "main": (1, 0),
    "main;work": (1, 5),
    "main;work;leaf_a": (2, 60),
    "main;work;mid": (1, 10),
    "main;work;mid;leaf_b": (2, 40),
    "main;work;thrower": (1, 0),
    "main;work;thrower;deep_throw": (1, 15),
}
