"""The artefact kinds the checklist collector reads. Discovery recognises every file by content;
the names declared here only tell it which unrecognised files deserve a warning."""
from precdx.collectors.base import ArtefactKind, Reads

READS = Reads(kinds=(
    ArtefactKind("env", "an environment listing", names=("env.txt",)),
    ArtefactKind("pip", "a pip listing", names=("pip_freeze.txt", "pip_list.txt", "requirements.txt")),
    ArtefactKind("eval", "an evaluation result", names=("eval.json",)),
    ArtefactKind("config.launch", "a launch script", names=("pretrain_gpt.sh", "run_train.sh")),
    ArtefactKind("config.yaml", "a training config", names=("train_config.yaml",)),
    ArtefactKind("config.toml", "a training config", names=("train_config.toml",)),
    ArtefactKind("config.json", "a DeepSpeed config", names=("ds_config.json",)),
    # hosts.txt is read by name by discovery (the run's hosts), which reports its own problems
    ArtefactKind("hosts", "a hostfile"),
    ArtefactKind("model.print", "a printed model structure"),
    ArtefactKind("model.params", "a parameter name / shape listing"),
))
