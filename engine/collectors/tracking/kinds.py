"""The artefact kinds the tracking collector reads. Discovery recognises every file by content; the
names declared here only tell it which unrecognised files deserve a warning. Its readers
decompress .gz / .zst files."""
from precdx.collectors.base import ArtefactKind, Reads

READS = Reads(
    kinds=(
        ArtefactKind("log.tracking", "a curve from an experiment-tracking tool"),
        ArtefactKind("tracking.tags", "a scalar-name mapping for tracking curves"),
        ArtefactKind("tracking.meta", "run metadata of a tracking tool"),
    ),
    compressed=True,
)
