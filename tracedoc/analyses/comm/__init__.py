"""Communication: per-collective statistics and the per-rank compact tables of the job view."""
