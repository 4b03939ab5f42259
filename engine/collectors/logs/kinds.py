"""The artefact kinds the logs collector reads. Discovery recognises every file by content; the
names declared here only tell it which unrecognised files deserve a warning. Its readers
decompress .gz / .zst logs."""
from precdx.collectors.base import ArtefactKind, Reads

READS = Reads(
    kinds=(
        ArtefactKind("log", "a training log", names=("train.log",)),
        ArtefactKind("log.trainer_state", "a trainer_state.json", names=("trainer_state.json",)),
        ArtefactKind("log.format", "a declared log format (precdx_log_formats YAML)"),
    ),
    compressed=True,
)
