"""The model: tables, intervals, the metric table and the saved records.

The rule for data: what tracedoc saves (a report, a diff, a trend, a log's result) is a msgspec
``Record`` (``record.py``) in integer nanoseconds, encoded as it is, its schema generated from the type;
dataclasses are only for private working state that is never saved.
"""
