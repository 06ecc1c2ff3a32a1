"""The job view: collectives matched across ranks, waits, the straggler and its cause (DESIGN.md, round 2).

Per rank, ``rank_tables`` reduces a trace to compact tables in the rank's worker; ``build_job``
joins those tables across ranks. Layer: above ``analyses``, below ``engine``.
"""

from .instances import LEAD_CATEGORIES, RankTables, collective_type, rank_tables
from .view import JobView, build_job

__all__ = ["LEAD_CATEGORIES", "JobView", "RankTables", "build_job", "collective_type", "rank_tables"]
