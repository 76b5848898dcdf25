"""`make bench`: the operator's drain measured against `kubectl drain` on the local control plane, in one run.

Figures are reported as measured, with ratios against the reference taken in the same run; nothing
here asserts a speed. See ``python -m bench --help``.
"""
