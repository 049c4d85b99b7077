#!/usr/bin/python3
"""Compares two models' reference logits for the same cases, as written by
official_reference.py (DIR/TAG.CASE.f32 and, with --routing,
DIR/TAG.CASE.routing.json).

  compare_logits.py DIR CASES_JSON TAG_A TAG_B

Per case: max |A - B| / max |A| over the whole case, the median of the same
per row, the rows whose expert choice differs between A and B in some MoE
layer (a router near-tie tipped by round-off), and the max over the other rows.
"""
import json
import os
import sys

import numpy as np


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    d, cases_path, ta, tb = sys.argv[1:]
    with open(cases_path) as f:
        cases = json.load(f)["cases"]
    worst = worst_kept = 0.0
    for name in cases:
        a = np.fromfile(os.path.join(d, f"{ta}.{name}.f32"), "<f4")
        b = np.fromfile(os.path.join(d, f"{tb}.{name}.f32"), "<f4")
        rows = cases[name]["window_end"]
        a, b = a.reshape(rows, -1), b.reshape(rows, -1)
        scale = np.abs(a).max()
        per_row = np.abs(a - b).max(axis=1) / scale
        flipped = np.zeros(rows, bool)
        ra, rb = (os.path.join(d, f"{t}.{name}.routing.json") for t in (ta, tb))
        if os.path.exists(ra) and os.path.exists(rb):
            with open(ra) as f:
                la = json.load(f)["layers"]
            with open(rb) as f:
                lb = json.load(f)["layers"]
            for layer in la:
                flipped |= np.array([x != y for x, y in zip(la[layer]["experts"], lb[layer]["experts"])])
        kept = per_row[~flipped].max() if (~flipped).any() else 0.0
        worst, worst_kept = max(worst, per_row.max()), max(worst_kept, kept)
        print(f"{name:8s} rows {rows:3d}  max {per_row.max():.4f}  median {np.median(per_row):.4f}  "
              f"rows routed differently {int(flipped.sum()):2d}  max over the others {kept:.4f}")
    print(f"all      max {worst:.4f}  max over rows routed alike {worst_kept:.4f}")


if __name__ == "__main__":
    main()
