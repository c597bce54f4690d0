"""The game: its rules, the deal scheme, the reference engine, the kernel, exact odds.

Pure computation: no file, network or Ray here, and no Arrow or Polars. Everything else in
clocksweep imports from this layer, and it imports nothing of the others.
"""
