"""What a training log says about the run besides its curve: the configuration frameworks echo at
start-up (Megatron/MindSpeed argument block, DeepSpeed engine configuration, Hugging Face
TrainingArguments and model config, torchtitan job config, `...Config(k=v, ...)` reprs), the
few settings only a log line shows (FSDP enabled, checkpoint iteration loaded, parameter count,
padded vocabulary, newly initialised weights), library versions and the accelerator.

Read once per file from its first `MAX_SCAN_BYTES` (start-up output lives there), cached by path,
size and modification time. Pure reading: canonical names, precedence over launch scripts and
comparisons are the checklist collector's job.

Echo formats (from the frameworks' own printing code):
  Megatron / MindSpeed  `---- arguments ----` then `  {arg} {'.' * (48 - len(arg))} {value}`
                        (no dots when the name is longer than 48), `---- end of arguments ----`
  DeepSpeed             `DeepSpeedEngine configuration:` then `  {attr} {'.' * (29 - len)} {value}`
                        lines and `  json = {` + the user config as indented JSON
  HF TrainingArguments  `TrainingArguments(` then `key=value,` lines and `)`; the Trainer's
                        `***** Running training *****` block (`Num Epochs = 1`, ...)
  HF model config       `Model config GPT2Config {` + JSON + `}`
  torchtitan            `Running with args: {...}` (dict repr) or `Running with configs: {` + JSON
  dataclass reprs       `OptimizerConfig(optimizer='adam', lr=0.0003, ...)` on one line
"""
from __future__ import annotations

import ast
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

MAX_SCAN_BYTES = 16 * 1024 * 1024   # start-up output; a run's config never comes later than this
MAX_BLOCK_LINES = 5000              # one echo block (argument dump, JSON) is never longer
MAX_VALUE_CHARS = 4096              # values longer than this are kept as text, not evaluated
MAX_LINE = 1 << 16
MAX_METRIC_LINES = 20_000           # training has long started: later lines echo no configuration
VERSION_SCAN_LINES = 50_000         # library versions and the accelerator show in the first lines

# Precedence of echo sources inside one log (lower wins): the framework's own full argument dump
# is the effective configuration; narrower reprs and single lines only fill gaps.
RANK = {
    "megatron_arguments": 0, "deepspeed_config": 1, "training_arguments": 1, "torchtitan_config": 1,
    "trainer_summary": 2, "model_config": 2, "config_repr": 3, "log_line": 4,
}
# Echo sources that list every setting with its effective value (defaults included): a key
# missing from such a dump does not exist in that framework version.
COMPLETE_DUMPS = ("megatron_arguments", "training_arguments", "deepspeed_config", "torchtitan_config")


@dataclass
class EchoSetting:
    key: str          # as printed (a dotted path for nested values)
    value: Any        # Python value (bool, int, float, str, list) as parsed
    origin: str       # one of RANK
    line: int


@dataclass
class LogInfo:
    """Everything `read_log_info` found in one log."""

    path: str
    settings: dict[str, EchoSetting] = field(default_factory=dict)
    versions: dict[str, tuple[str, int]] = field(default_factory=dict)   # package -> (version, line)
    device_votes: dict[str, int] = field(default_factory=dict)           # npu / gpu -> lines
    origins: set[str] = field(default_factory=set)
    framework_hint: str | None = None
    scanned_bytes: int = 0
    problems: list[tuple[str, int | None]] = field(default_factory=list)  # (message, line)

    @property
    def complete_dump(self) -> bool:
        return any(o in self.origins for o in COMPLETE_DUMPS)

    @property
    def device(self) -> str | None:
        npu, gpu = self.device_votes.get("npu", 0), self.device_votes.get("gpu", 0)
        if npu == gpu:
            return None
        return "npu" if npu > gpu else "gpu"

    def put(self, key: str, value: Any, origin: str, line: int) -> None:
        if value is None or key == "":
            return
        old = self.settings.get(key)
        if old is None or RANK[origin] < RANK[old.origin]:
            self.settings[key] = EchoSetting(key, value, origin, line)


# ------------------------------------------------------------------ value parsing
_BOOLS = {"True": True, "False": False, "true": True, "false": False}
_ENUM_REPR = re.compile(r"^<[\w.]+\.(\w+): '?([^'>]*)'?>$")   # <IntervalStrategy.STEPS: 'steps'>
_ENUM_NAME = re.compile(r"^(?:[A-Z]\w*\.)+([A-Z][A-Z0-9_]*)$")  # IntervalStrategy.STEPS


def py_value(text: str) -> Any:
    """A value as a framework printed it (Python repr, JSON or bare text); None for None/null."""
    text = text.strip()
    if text in ("None", "null", ""):
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    m = _ENUM_REPR.match(text)
    if m:
        return m.group(2)
    m = _ENUM_NAME.match(text)
    if m and not text.startswith("torch."):
        return m.group(1).lower()
    if len(text) <= MAX_VALUE_CHARS and text[:1] in "[({'\"-+.0123456789":
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            pass
    return text


def flat(prefix: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Nested dicts as dotted keys; lists of scalars kept; lists of dicts dropped."""
    if isinstance(value, dict):
        if depth > 16:
            return
        for k, v in value.items():
            yield from flat(f"{prefix}.{k}" if prefix else str(k), v, depth + 1)
        return
    if isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        return
    yield prefix, value


def split_top_level(text: str) -> list[str]:
    """`a=1, b=[1, 2], c='x, y'` -> ['a=1', 'b=[1, 2]', "c='x, y'"] (commas outside brackets and quotes)."""
    parts, depth, quote, start = [], 0, "", 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


# ------------------------------------------------------------------ line patterns
_ARGS_START = re.compile(r"-{8,} arguments -{8,}")
_ARGS_END = re.compile(r"-{8,} end of arguments -{8,}")
_ARG_LINE = re.compile(r"^(?:.*?[\]:>] ?)?\s{2}([A-Za-z_][\w]*) (?:\.+ |\s)(.*)$")
_DS_START = "DeepSpeedEngine configuration:"
_DS_LINE = re.compile(r"\]\s{2,}([A-Za-z_]\w*) (?:\.+ | )(.*)$|^\s{2}([A-Za-z_]\w*) (?:\.+ | )(.*)$")
_DS_JSON = re.compile(r"\s{2}json = (\{.*)$")
_TA_START = re.compile(r"\b(\w*(?:Training|Trainer|Finetuning|Finetune|Sft|SFT|Dpo|DPO|Grpo|GRPO)\w*(?:Arguments|Config))\($")
_TA_LINE = re.compile(r"^\s*([A-Za-z_]\w*)=(.*),\s*$")
_MODEL_CONFIG = re.compile(r"Model config (\w+) \{\s*$")
_TT_ARGS = re.compile(r"Running with args: (\{.*\})\s*$")
_TT_CONFIGS = re.compile(r"Running with configs: \{\s*$")
_REPR = re.compile(r"\b([A-Z]\w*Config)\((\w+=.*)\)\s*$")
_SUMMARY = re.compile(
    r"\b(Num examples|Num Epochs|Instantaneous batch size per device|"
    r"Total train batch size \(w\. parallel, distributed & accumulation\)|Gradient Accumulation steps|"
    r"Total optimization steps|Number of trainable parameters)\s*=\s*([\d,.]+)")
_SUMMARY_KEYS = {
    "Num examples": "num_train_examples", "Num Epochs": "num_train_epochs",
    "Instantaneous batch size per device": "per_device_train_batch_size",
    "Total train batch size (w. parallel, distributed & accumulation)": "total_train_batch_size",
    "Gradient Accumulation steps": "gradient_accumulation_steps",
    "Total optimization steps": "total_optimization_steps",
    "Number of trainable parameters": "num_trainable_parameters",
}
_LOAD_ITER = re.compile(r"loading (?:distributed |torch |release )?checkpoint from (\S+) at iteration (\d+)")
_PARAMS = re.compile(r"number of parameters on \(tensor, pipeline\) model parallel rank \((\d+), (\d+)\): (\d+)")
_PADDED_VOCAB = re.compile(r"padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")
_NEW_WEIGHTS = re.compile(r"Some weights of \w+ were not initialized from the model checkpoint at (\S+?)"
                          r" and are newly initialized(?: because the shapes did not match)?: (\[.*)")
_UNUSED_WEIGHTS = re.compile(r"Some weights of the model checkpoint at (\S+?) were not used when initializing")
_HF_WEIGHTS = re.compile(r"loading weights file (\S+)")
_ZERO_STAGE = re.compile(r"Creating (?:(\S+) )?ZeRO stage (\d) optimizer")
_PARAMS_DTYPE = re.compile(r"^using (torch\.\w+) for parameters")
_DP_LINE = re.compile(r"using world size: (\d+), data-parallel size: (\d+)(?:, context-parallel size: (\d+))?"
                      r".*?tensor-model-parallel size: (\d+).*?pipeline-model-parallel size: (\d+)")

# library versions printed by launchers, frameworks and environment reports
_V = r"v?(\d+(?:\.\d+)+(?:[.\-]?(?:rc|RC|post|dev|alpha|beta|a|b)\d*)?(?:\.post\d+)?(?:\+[\w.]+)?)"
_VERSION_LINES: tuple[tuple[str, re.Pattern, tuple[str, ...]], ...] = (
    ("nccl", re.compile(r"NCCL version " + _V), ("NCCL version",)),
    ("deepspeed", re.compile(r"DeepSpeed info: version=" + _V), ("DeepSpeed info",)),
    ("transformers", re.compile(r"\"transformers_version\": \"" + _V + "\""), ("transformers_version",)),
    ("cann", re.compile(r"ascend-toolkit/(\d+\.\d+\.(?:RC\d+|T\d+|\d+)(?:\.\w+)?)/"), ("ascend-toolkit/",)),
    ("cann", re.compile(r"(?i)\bCANN(?:[ _]version)?\s*[:=]?\s*(\d+\.\d+\.(?:RC\d+|T\d+|\d+)(?:\.\w+)?)"), ("CANN",)),
    ("torch", re.compile(r"(?i)\b(?:pytorch|torch)(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("orch",)),
    ("torch-npu", re.compile(r"(?i)\btorch[_-]npu(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("npu",)),
    ("transformers", re.compile(r"(?i)\btransformers(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("ransformers",)),
    ("deepspeed", re.compile(r"(?i)\bdeepspeed(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("eep",)),
    ("megatron-core", re.compile(r"(?i)\bmegatron[_-]core(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("egatron",)),
    ("mindspeed", re.compile(r"(?i)\bmindspeed(?: version|\.__version__|_version)\s*(?:is\s*|:|=)?\s*['\"]?" + _V),
     ("ind",)),
    ("cuda", re.compile(r"(?i)\bCUDA(?: version| used to build PyTorch| runtime version)\s*:?\s*" + _V), ("CUDA", "cuda")),
    ("cuda", re.compile(r"NCCL version [\d.]+\+cuda(\d+\.\d+)"), ("+cuda",)),
    ("hccl", re.compile(r"(?i)\bHCCL(?: version|_version)\s*:?\s*" + _V), ("HCCL",)),
)
# DeepSpeed's "general environment info" report: `torch version .......... 2.1.0`
_ENV_REPORT = re.compile(r"^\s*(torch|torch cuda|deepspeed|torch_npu|transformers|nvcc)\s+(?:version|info)\s+\.{3,}\s+"
                         r"\[?'?(\d+(?:\.\d+)+[\w.+]*)")
_ENV_REPORT_NAMES = {"torch": "torch", "torch cuda": "cuda", "deepspeed": "deepspeed", "torch_npu": "torch-npu",
                     "transformers": "transformers", "nvcc": "cuda"}

# lines that show the accelerator (never taken from config values: a Megatron argument dump on an
# NPU still prints distributed_backend nccl)
_NPU_MARKS = ("torch_npu", "ProcessGroupHCCL", "Ascend", "ascend-toolkit", "HCCL_", "npu:", "[PTA]",
              "transfer_to_npu", "CANN")
_GPU_MARKS = ("NCCL INFO", "ProcessGroupNCCL", "cuda:0", "CUDA_VISIBLE_DEVICES", "NVIDIA", "nvidia-smi",
              "cudnn", "cuDNN", "Tesla ", "A100", "H100", "H800", "A800")
_MINDSPEED_ARGS = ("use_ascend_mc2", "npu_deterministic", "use_fused_rmsnorm", "use_mc2", "use_deter_comp",
                   "reuse_fp32_param", "use_fusion_attn_v2")


# every literal the version and device checks look for: a line without any is skipped at once
_NEEDLES = re.compile("|".join(re.escape(n) for n in sorted(
    {n for _, _, ns in _VERSION_LINES for n in ns} | set(_NPU_MARKS) | set(_GPU_MARKS) | {"....."},
    key=len, reverse=True)))


# ------------------------------------------------------------------ reading
_cache: dict[tuple[str, int, int], LogInfo] = {}
_cache_lock = threading.Lock()
_CACHE_MAX = 256


def read_log_info(path: str | Path) -> LogInfo:
    """The start-up information of one log (cached per path, size and mtime). Never raises:
    an unreadable file gives an empty LogInfo whose `problems` say why."""
    p = str(path)
    try:
        st = os.stat(p)
        key = (p, st.st_size, st.st_mtime_ns)
    except OSError as exc:
        info = LogInfo(path=p)
        info.problems.append((f"cannot read log: {exc.strerror or exc}", None))
        return info
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    info = LogInfo(path=p)
    try:
        with open(p, "rb") as fh:
            head = fh.read(65536).rstrip(b"\x00")
            if b"\x00" in head:
                return info  # binary: the log collector reports it
            fh.seek(0)
            lines = _Lines(fh)
            _Scanner(info).run(lines)
            info.scanned_bytes = lines.bytes
    except OSError as exc:
        info.problems.append((f"cannot read log: {exc.strerror or exc}", None))
        return info
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[key] = info
    return info


class _Lines:
    """The lines of a binary file handle, read on demand and forgotten once passed: `get(i)` gives
    line i (0-based; None past the end or past MAX_SCAN_BYTES), for i never below the last
    `release`d index. Memory stays one block's worth of lines, whatever the log size."""

    def __init__(self, fh) -> None:
        self.fh = fh
        self.buf: dict[int, str] = {}
        self.low = 0           # lowest index still buffered
        self.next = 0          # index of the next line to read from the file
        self.bytes = 0
        self.done = False
        self.metric_lines = 0  # iteration/metric lines seen: start-up is over after many

    def get(self, i: int) -> str | None:
        while i >= self.next and not self.done:
            raw = self.fh.readline(MAX_LINE + 1)
            if not raw or self.bytes >= MAX_SCAN_BYTES or self.metric_lines > MAX_METRIC_LINES:
                self.done = True
                break
            self.bytes += len(raw)
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                rest = self.fh.readline()  # drop the remainder of an over-long line
                self.bytes += len(rest)
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:MAX_LINE]
            if "loss" in text and ("|" in text or "{'" in text):
                self.metric_lines += 1
            self.buf[self.next] = text
            self.next += 1
        return self.buf.get(i)

    def release(self, i: int) -> None:
        """Lines below i are not looked at again."""
        low = self.low
        while low < i:
            self.buf.pop(low, None)
            low += 1
        self.low = low


class _Scanner:
    """One pass over the lines; a small state machine for the multi-line echo blocks."""

    def __init__(self, info: LogInfo) -> None:
        self.info = info
        self.seen_blocks: set[str] = set()

    def run(self, lines: _Lines) -> None:
        i = 0
        while True:
            lines.release(i)
            line = lines.get(i)
            if line is None:
                break
            lineno = i + 1
            i += 1
            if "arguments" in line and _ARGS_START.search(line):
                i = self._megatron_block(lines, i, lineno)
                continue
            if _DS_START in line:
                i = self._deepspeed_block(lines, i)
                continue
            if line.endswith("(") and "(" in line:
                m = _TA_START.search(line)
                if m:
                    i = self._training_arguments(lines, i, m.group(1))
                    continue
            if "Model config " in line:
                m = _MODEL_CONFIG.search(line)
                if m:
                    i = self._model_config(lines, i, lineno)
                    continue
            if "Running with" in line:
                i = self._torchtitan(lines, i, line, lineno)
                continue
            self._single_line(line, lineno)

    # -- blocks
    def _megatron_block(self, lines: _Lines, i: int, start: int) -> int:
        first = "megatron_arguments" not in self.seen_blocks
        end = i + MAX_BLOCK_LINES
        found = 0
        ended = False
        while i < end:
            line = lines.get(i)
            if line is None:
                break
            i += 1
            if _ARGS_END.search(line):
                ended = True
                break
            if not first:
                continue
            m = _ARG_LINE.match(line)
            if m:
                found += 1
                self.info.put(m.group(1), py_value(m.group(2)), "megatron_arguments", i)
        if first and not ended:
            self.info.problems.append(("argument block has no end line; read as far as it goes", start))
        if first and found:
            self.seen_blocks.add("megatron_arguments")
            self.info.origins.add("megatron_arguments")
            keys = set(self.info.settings)
            self.info.framework_hint = "mindspeed" if any(k in keys for k in _MINDSPEED_ARGS) else "megatron"
        return i

    def _deepspeed_block(self, lines: _Lines, i: int) -> int:
        first = "deepspeed_config" not in self.seen_blocks
        self.seen_blocks.add("deepspeed_config")
        end = i + MAX_BLOCK_LINES
        while i < end:
            line = lines.get(i)
            if line is None:
                break
            j = _DS_JSON.search(line)
            if j:
                body, i = _collect_braces(lines, i + 1, j.group(1))
                if first:
                    data = _json(body)
                    if isinstance(data, dict):
                        for k, v in flat("", data):
                            self.info.put(k, v, "deepspeed_config", i)
                break
            m = _DS_LINE.search(line)
            if not m:
                break
            i += 1
            if first:
                key, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
                val = py_value(value)
                for k, v in flat(key, val) if isinstance(val, dict) else ((key, val),):
                    self.info.put(_DS_RENAME.get(k, k), v, "deepspeed_config", i)
        if first:
            self.info.origins.add("deepspeed_config")
        return i

    def _training_arguments(self, lines: _Lines, i: int, cls: str) -> int:
        first = "training_arguments" not in self.seen_blocks
        self.seen_blocks.add("training_arguments")
        end = i + MAX_BLOCK_LINES
        found = 0
        while i < end:
            line = lines.get(i)
            if line is None:
                break
            i += 1
            if line.strip() == ")":
                break
            m = _TA_LINE.match(line)
            if m and first:
                found += 1
                val = py_value(m.group(2))
                for k, v in flat(m.group(1), val) if isinstance(val, dict) else ((m.group(1), val),):
                    self.info.put(k, v, "training_arguments", i)
        if first and found:
            self.info.origins.add("training_arguments")
            if not self.info.framework_hint:
                self.info.framework_hint = "hf_trainer"
        return i

    def _model_config(self, lines: _Lines, i: int, lineno: int) -> int:
        body, i = _collect_braces(lines, i, "{")
        if "model_config" in self.seen_blocks:
            return i
        data = _json(body)
        if not isinstance(data, dict):
            return i
        self.seen_blocks.add("model_config")
        self.info.origins.add("model_config")
        version = data.get("transformers_version")
        if isinstance(version, str):
            self._version("transformers", version, lineno)
        for k, v in flat("", data):
            if k in ("transformers_version", "architectures", "_name_or_path"):
                continue
            if k in ("torch_dtype", "dtype"):
                k = "checkpoint_dtype"  # the dtype the checkpoint was saved in, not the training dtype
            self.info.put(k, v, "model_config", lineno)
        return i

    def _torchtitan(self, lines: _Lines, i: int, line: str, lineno: int) -> int:
        m = _TT_ARGS.search(line)
        data: Any = None
        if m:
            data = py_value(m.group(1))
        elif _TT_CONFIGS.search(line):
            body, i = _collect_braces(lines, i, "{")
            data = _json(body)
        if isinstance(data, dict) and "torchtitan_config" not in self.seen_blocks:
            self.seen_blocks.add("torchtitan_config")
            self.info.origins.add("torchtitan_config")
            self.info.framework_hint = self.info.framework_hint or "torchtitan"
            for k, v in flat("", data):
                self.info.put(k, v, "torchtitan_config", lineno)
        return i

    # -- single lines
    def _single_line(self, line: str, lineno: int) -> None:
        info = self.info
        if "Config(" in line:
            m = _REPR.search(line)
            if m:
                for part in split_top_level(m.group(2)):
                    key, sep, value = part.partition("=")
                    if sep and re.fullmatch(r"[A-Za-z_]\w*", key.strip()):
                        val = py_value(value)
                        if not isinstance(val, str) or not val.startswith("<"):
                            info.put(key.strip(), val, "config_repr", lineno)
                info.origins.add("config_repr")
                return
        if " = " in line and ("Num " in line or "batch size" in line or "steps" in line or "Number of" in line):
            m = _SUMMARY.search(line)
            if m:
                info.put(_SUMMARY_KEYS[m.group(1)], _number(m.group(2)), "trainer_summary", lineno)
                info.origins.add("trainer_summary")
                if not info.framework_hint:
                    info.framework_hint = "hf_trainer"
                return
        if "FSDP enabled" in line:
            info.put("fsdp", True, "log_line", lineno)
        elif "checkpoint from" in line:
            m = _LOAD_ITER.search(line)
            if m:
                info.put("load", m.group(1), "log_line", lineno)
                info.put("load_iteration", int(m.group(2)), "log_line", lineno)
        elif "number of parameters on" in line:
            m = _PARAMS.search(line)
            if m and m.group(1) == "0" and m.group(2) == "0":
                info.put("num_parameters_rank0", int(m.group(3)), "log_line", lineno)
        elif "padded vocab" in line:
            m = _PADDED_VOCAB.search(line)
            if m:
                info.put("tokenizer_vocab_size", int(m.group(1)), "log_line", lineno)
                info.put("padded_vocab_size", int(m.group(3)), "log_line", lineno)
        elif "Some weights of" in line:
            m = _NEW_WEIGHTS.search(line)
            if m:
                names = m.group(2)
                count = names.count("'") // 2 if "'" in names else 1
                info.put("newly_initialized_weights", max(count, 1), "log_line", lineno)
            elif _UNUSED_WEIGHTS.search(line):
                info.put("unused_checkpoint_weights", True, "log_line", lineno)
        elif "loading weights file" in line:
            m = _HF_WEIGHTS.search(line)
            if m:
                info.put("weights_file", m.group(1), "log_line", lineno)
        elif "ZeRO stage" in line:
            m = _ZERO_STAGE.search(line)
            if m:
                info.put("zero_stage", int(m.group(2)), "log_line", lineno)
        elif line.startswith("using torch.") and "for parameters" in line:
            m = _PARAMS_DTYPE.match(line)
            if m:
                info.put("params_dtype", m.group(1), "log_line", lineno)
        elif "using world size:" in line:
            m = _DP_LINE.search(line)
            if m:
                info.put("world_size", int(m.group(1)), "log_line", lineno)
                info.put("data_parallel_size", int(m.group(2)), "log_line", lineno)
                if m.group(3):
                    info.put("context_parallel_size", int(m.group(3)), "log_line", lineno)
                info.put("tensor_model_parallel_size", int(m.group(4)), "log_line", lineno)
                info.put("pipeline_model_parallel_size", int(m.group(5)), "log_line", lineno)
        if lineno <= VERSION_SCAN_LINES:
            self._versions_and_device(line, lineno)

    def _versions_and_device(self, line: str, lineno: int) -> None:
        if not _NEEDLES.search(line):
            return  # most lines: one scan instead of forty substring tests
        for name, pattern, needles in _VERSION_LINES:
            if any(n in line for n in needles):
                m = pattern.search(line)
                if m:
                    self._version(name, m.group(1), lineno)
        if "....." in line and ("version" in line or "info" in line):
            m = _ENV_REPORT.match(line)
            if m:
                self._version(_ENV_REPORT_NAMES[m.group(1)], m.group(2), lineno)
        votes = self.info.device_votes
        if any(mark in line for mark in _NPU_MARKS):
            votes["npu"] = votes.get("npu", 0) + 1
        if any(mark in line for mark in _GPU_MARKS):
            votes["gpu"] = votes.get("gpu", 0) + 1

    def _version(self, name: str, version: str, lineno: int) -> None:
        if name not in self.info.versions:
            self.info.versions[name] = (version, lineno)


# DeepSpeed engine attribute names that are not the ds_config.json key of the same setting
_DS_RENAME = {
    "bfloat16_enabled": "bf16", "bfloat16_config.enabled": "bf16", "fp16_enabled": "fp16",
    "zero_optimization_stage": "zero_stage", "optimizer_name": "optimizer",
    "gradient_clipping": "gradient_clipping", "initial_dynamic_scale": "initial_loss_scale",
    "train_micro_batch_size_per_gpu": "train_micro_batch_size_per_gpu",
    "communication_data_type": "communication_data_type", "grad_accum_dtype": "grad_accum_dtype",
}


def _collect_braces(lines: _Lines, i: int, opening: str) -> tuple[str, int]:
    """Lines from `i` appended to `opening` until the braces balance (outside strings)."""
    parts = [opening]
    depth = _depth(opening)
    end = i + MAX_BLOCK_LINES
    while depth > 0 and i < end:
        line = lines.get(i)
        if line is None:
            break
        i += 1
        parts.append(line)
        depth += _depth(line)
    return "\n".join(parts), i


def _depth(text: str) -> int:
    if '"' in text:
        text = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    return text.count("{") + text.count("[") - text.count("}") - text.count("]")


def _json(body: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _number(text: str) -> int | float | str:
    t = text.replace(",", "").rstrip(".")
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return text
