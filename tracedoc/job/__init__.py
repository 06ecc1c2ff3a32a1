"""The job view: collectives matched across ranks, waits, the straggler and its cause (docs/job.md).

Per rank, the ``collective_calls`` / ``rank_tables`` analyses (``tracedoc.analyses.comm.instances``)
reduce a trace to compact tables in the rank's worker; ``join_job`` joins those tables across ranks.
Layer: above ``analyses``, below ``engine``.
"""

from .join import build_job, join_job
from .view import JobJoin, JobView

__all__ = ["JobJoin", "JobView", "build_job", "join_job"]
