"""Rank fan-out: the files of a run read in parallel, one pure task per file, in a local process pool or on a
Dask cluster; single files and jobs alike go through it. What a task sends back travels as plain data
(``wire``), never pickle."""
