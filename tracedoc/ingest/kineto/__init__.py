"""Reader for torch.profiler / Kineto Chrome trace JSON, every generation.

The file is streamed in chunks. Each chunk is cut at an event boundary and decoded with msgspec
into small typed structs that hold only the fields tracedoc uses (everything else is skipped by the
decoder, never materialised as a Python dict); the structs of a chunk become numpy columns and are
dropped before the next chunk is read. Peak memory is therefore the columns plus one chunk.

A cut is accepted only if the piece before it decodes as a JSON array: a cut inside a string or a
nested value leaves the piece unbalanced, so a wrong cut can never go unnoticed.

A chunk is read by the compiled scan (``_kscan.c``, built at install where a C compiler is present) into
per-field columns without a Python object per event; a chunk it is not sure to read exactly, or every
chunk where it is not built (``TRACEDOC_DECODER=python``), is decoded with msgspec. Both give the same
tables.

Modules: ``source`` (bytes of a plain or gzip file), ``decode`` (msgspec structs), ``rows`` (a chunk's
fields as columns, from either decoder), ``columns`` and ``handlers`` (rows -> numpy tables), ``stream``
(chunking, worker processes), ``salvage`` (the end of the file, truncated files), ``metadata``
(finishing the ``Trace``).
"""

from .columns import LABEL_ID_BASE
from .stream import CHUNK_BYTES, read_kineto

__all__ = ["CHUNK_BYTES", "LABEL_ID_BASE", "read_kineto"]
