"""The artefact kinds the msprobe collector reads. Discovery recognises every file by content; the
names declared here only tell it which unrecognised files deserve a warning."""
from precdx.collectors.base import ArtefactKind, Reads

READS = Reads(kinds=(
    ArtefactKind("msprobe.dump", "an msprobe dump", names=("dump.json",)),
    ArtefactKind("msprobe.stack", "an msprobe stack.json", names=("stack.json",)),
    ArtefactKind("msprobe.construct", "an msprobe construct.json", names=("construct.json",)),
    ArtefactKind("msprobe.compare_result", "an msprobe compare result", pattern=r"^compare_result_.*\.(csv|xlsx)$"),
    ArtefactKind("msprobe.monitor", "an msprobe monitor table",
                 pattern=r"^(grad_reduced|grad_unreduced|actv|actv_grad|exp_avg|exp_avg_sq|param_origin|param_updated)"
                         r"_\d+-\d+\.csv$"),
    ArtefactKind("msprobe.debug", "an msprobe debug-level dump"),
    ArtefactKind("msprobe.config_check", "an msprobe config_check result"),
    ArtefactKind("msprobe.precheck", "an msprobe API precision pre-check result"),
    ArtefactKind("msprobe.free_benchmark", "an msprobe free-benchmark result"),
    ArtefactKind("msprobe.anomaly_analyze", "an msprobe overflow / anomaly analysis"),
    ArtefactKind("msprobe.diff_analyze", "an msprobe compare -da analysis"),
    ArtefactKind("msprobe.monitor_alerts", "msprobe monitor anomaly alerts"),
    ArtefactKind("msprobe.ckpt_similarity", "an msprobe checkpoint similarity result"),
))
