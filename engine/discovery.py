"""Run discovery: turns run folders (or a case folder) into a `Case` whose runs carry the
artefacts every collector recognised by content, plus what was ignored and why. Discovery walks
and sniffs only: the collectors recognise the files, declare the artefact kinds they read (the
file names a run layout usually gives them come from there) and turn the case into facts;
engine/inspection.py shows a discovered case (`precdx inspect`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Sequence

from precdx.collectors import all_collectors, artefact_kinds, reads_of
from precdx.collectors.base import ROLE_ORDER, Artefact, Case, Collector, RunDir
from precdx.compression import compression_of, read_head
from precdx.errors import PrecdxError, Warnings

HEAD_BYTES = 64 * 1024
# Files above this size are not sniffed: datasets, checkpoints and tensor dumps of this size are
# never configs or logs we can use, and opening thousands of them is what makes discovery slow.
MAX_SNIFF_BYTES = 2 * 1024 ** 3
MAX_FILES_PER_RUN = 50_000
MAX_DEPTH = 16
# Folders that never hold run artefacts but can be huge.
SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv"}

_GROUP_DIR = re.compile(r"^(group|grp|node_?group)[-_]?\d+$", re.IGNORECASE)
# a host name is at most 253 characters (DNS); a longer "name" is junk, not a host
_HOST_LINE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.:\-]{0,252})(?:\s+slots\s*=\s*\d+|\s*:\s*\d+)?\s*$")


def discover_case(case_dir: str | Path, *, warnings: Warnings | None = None,
                  collectors: Sequence[Collector] | None = None) -> Case:
    """A case folder: `baseline/`, `target/`, optional `target_rerun*/`, `baseline_rerun*/`."""
    root = Path(case_dir)
    if not root.exists():
        raise PrecdxError("case folder does not exist", path=str(root))
    if not root.is_dir():
        raise PrecdxError("not a folder (expected a case folder holding baseline/ and target/)",
                          path=str(root))
    found: dict[str, list[Path]] = {r: [] for r in ROLE_ORDER}
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        role = _role_of_folder(child.name)
        if role:
            found[role].append(child)
    missing = [r for r in ("baseline", "target") if not found[r]]
    if missing == ["baseline"]:
        # a case folder that holds the target alone is what people often bring: one run, read on
        # its own (its own curve's health, priors, the baseline's log as the step that splits them)
        warnings = warnings if warnings is not None else Warnings()
        warnings.add("no baseline/ sub-folder: target/ is diagnosed on its own (add baseline/ to compare the two)",
                     path=str(root))
    elif missing:
        present = ", ".join(sorted(p.name for p in root.iterdir() if p.is_dir())) or "none"
        raise PrecdxError(
            f"not a case folder: no {' and no '.join(m + '/' for m in missing)} sub-folder",
            path=str(root),
            hint=f"sub-folders found: {present}; or pass --target DIR --baseline DIR")
    if len(found["baseline"]) > 1 or len(found["target"]) > 1:
        raise PrecdxError("more than one baseline or target folder", path=str(root))
    case = discover_runs(target=found["target"][0], baseline=found["baseline"][0] if found["baseline"] else None,
                         target_reruns=found["target_rerun"], baseline_reruns=found["baseline_rerun"],
                         warnings=warnings, collectors=collectors, _names_from_folders=True)
    case.root = root
    _label_declared_logs(case, warnings)
    return case


def _label_declared_logs(case: Case, warnings: Warnings) -> None:
    """Name the format of logs that only a user-declared format (a `precdx_log_formats` YAML in
    the run or case folder) reads, so `precdx inspect` shows `log [mytrainer (declared)]`
    rather than `unrecognised`; such a file is a log, not also an env listing whose
    KEY=VALUE-looking lines fooled the env sniffer."""
    from precdx.collectors.logs.formats import builtin_parsers
    from precdx.collectors.logs.formats.declared import TOP_KEY, DeclaredParser, load_declared_formats
    from precdx.collectors.logs.model import Record
    from precdx.collectors.logs.reader import parse_lines

    shared: list[Path] = []
    if case.root is not None and Path(case.root).is_dir():
        for p in sorted(Path(case.root).glob("*.y*ml")):
            if f"{TOP_KEY}:".encode() in _head(p, HEAD_BYTES):
                shared.append(p)
    for run in case.runs:
        paths = [a.path for a in run.artefacts if a.kind == "log.format"] + [p for p in shared]
        if not paths:
            continue
        formats = []
        for p in dict.fromkeys(paths):
            try:
                formats.extend(load_declared_formats(p))
            except PrecdxError:
                continue  # the logs collector reports a broken format file
        if not formats:
            continue
        declared_names = {f.name for f in formats}
        relabelled: set[Path] = set()
        for art in run.artefacts:
            if art.kind != "log" or art.detail in ("binary", "empty"):
                continue
            try:
                head = read_head(art.path, HEAD_BYTES)
            except OSError:
                continue
            lines = head.decode("utf-8", errors="replace").splitlines()
            if lines and not head.endswith(b"\n"):
                lines = lines[:-1]
            counts: dict[str, int] = {}
            parsers = [DeclaredParser(f) for f in formats] + builtin_parsers()
            for item in parse_lines(lines, parsers):
                if isinstance(item, Record):
                    counts[item.framework] = counts.get(item.framework, 0) + 1
            if counts:
                best = max(counts, key=counts.get)
                if best in declared_names:
                    art.detail = f"{best} (declared)"
                    relabelled.add(art.path)
        if relabelled:
            run.artefacts = [a for a in run.artefacts if not (a.kind == "env" and a.path in relabelled)]


def discover_folder(path: str | Path, *, warnings: Warnings | None = None,
                    collectors: Sequence[Collector] | None = None) -> Case:
    """A case folder, or else a single run folder (as the target run): what `precdx inspect`
    accepts."""
    root = Path(path)
    if root.is_file():
        return discover_runs(target=root, warnings=warnings, collectors=collectors)
    if root.is_dir() and not any(_role_of_folder(p.name) for p in root.iterdir() if p.is_dir()):
        case = discover_runs(target=root, warnings=warnings, collectors=collectors)
        case.root = root
        _label_declared_logs(case, warnings)
        return case
    return discover_case(root, warnings=warnings, collectors=collectors)


def discover_runs(*, target: str | Path, baseline: str | Path | None = None,
                  target_reruns: Iterable[str | Path] = (), baseline_reruns: Iterable[str | Path] = (),
                  warnings: Warnings | None = None, collectors: Sequence[Collector] | None = None,
                  _names_from_folders: bool = False) -> Case:
    """Runs given one by one (`precdx diagnose --target DIR --baseline DIR ...`)."""
    warnings = warnings if warnings is not None else Warnings()
    collectors = list(collectors) if collectors is not None else all_collectors()
    specs: list[tuple[str, Path, str]] = []
    for role, dirs in (("baseline", [baseline] if baseline is not None else []),
                       ("target", [target]),
                       ("baseline_rerun", list(baseline_reruns)),
                       ("target_rerun", list(target_reruns))):
        for i, d in enumerate(dirs):
            path = Path(d)
            name = path.name if _names_from_folders else (role if i == 0 else f"{role}{i + 1}")
            specs.append((role, path, name))
    seen: dict[Path, str] = {}
    runs: list[RunDir] = []
    for role, path, name in specs:
        if not path.exists():
            raise PrecdxError(f"{role} run folder does not exist", path=str(path),
                              hint="give a run folder, or one training log or tracking file")
        real = path.resolve()
        if real in seen:
            raise PrecdxError(f"the same {'folder' if path.is_dir() else 'file'} is given as {seen[real]} "
                              f"and as {role}", path=str(path))
        seen[real] = role
        if path.is_dir():
            runs.extend(_discover_run(role, name, path, collectors, warnings))
        elif path.is_file():
            runs.append(_discover_file_run(role, name, path, collectors, warnings))
        else:
            raise PrecdxError(f"{role} run must be a folder or a file", path=str(path))
    case = Case(runs=runs)
    _label_declared_logs(case, warnings)
    return case


def _discover_file_run(role: str, name: str, path: Path, collectors: Sequence[Collector],
                       warnings: Warnings) -> RunDir:
    """A run given as one file (a training log, possibly .gz/.zst, or a tracking file): the run
    is that file alone, so picking one log out of a folder holding several is explicit."""
    run = RunDir(role=role, name=name, root=path)
    _sniff_file(run, path, path.resolve(), collectors, warnings, explicit=True)
    if not run.artefacts:
        why = run.ignored[0][1] if run.ignored else "not recognised"
        raise PrecdxError(f"{role} file is not a training log or tracking file precdx recognises ({why})",
                          path=str(path), hint="give the run folder instead, or see `precdx inspect`")
    return run


def _role_of_folder(name: str) -> str | None:
    low = name.lower()
    for role in ("target_rerun", "baseline_rerun"):
        if low.startswith(role):
            return role
    if low in ("baseline", "target"):
        return low
    return None


def _discover_run(role: str, name: str, root: Path, collectors: Sequence[Collector],
                  warnings: Warnings) -> list[RunDir]:
    groups = _group_dirs(root)
    if not groups:
        run = RunDir(role=role, name=name, root=root)
        _scan(run, root, collectors, warnings)
        run.hosts = _read_hosts(root, warnings)
        _require_content(run, warnings)
        return [run]
    # Files next to the group folders (e.g. one shared pip_freeze.txt) belong to every group.
    shared = RunDir(role=role, name=name, root=root)
    _scan(shared, root, collectors, warnings, exclude={g.resolve() for g in groups})
    runs = []
    for g in groups:
        run = RunDir(role=role, name=f"{name}/{g.name}", root=g, group=g.name)
        _scan(run, g, collectors, warnings)
        run.artefacts.extend(a for a in shared.artefacts if a not in run.artefacts)
        run.ignored.extend(shared.ignored)
        run.hosts = _read_hosts(g, warnings)
        _require_content(run, warnings)
        runs.append(run)
    return runs


def _group_dirs(root: Path) -> list[Path]:
    """Sub-folders that are separate runs of the same job (node groups): named group* or
    holding their own hostfile next to other run files."""
    out = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.is_symlink():
            continue
        if _GROUP_DIR.match(child.name):
            out.append(child)
        elif (child / "hosts.txt").is_file() and any(
                p.is_file() and p.name != "hosts.txt" for p in child.iterdir()):
            out.append(child)
    return out


def _require_content(run: RunDir, warnings: Warnings) -> None:
    if not run.artefacts and not run.ignored:
        raise PrecdxError(f"{run.role} run folder is empty", path=str(run.root))
    if not run.artefacts:
        warnings.add(f"nothing recognised in the {run.role} run ({len(run.ignored)} files ignored; "
                     "see `precdx inspect`)", path=str(run.root))


def _scan(run: RunDir, root: Path, collectors: Sequence[Collector], warnings: Warnings,
          exclude: set[Path] | None = None) -> None:
    real_root = root.resolve()
    count = 0
    def unreadable(exc: OSError) -> None:
        run.ignored.append((Path(exc.filename or root), f"cannot list folder: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=unreadable):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        kept = []
        for d in sorted(dirnames):
            sub = here / d
            if exclude and sub.resolve() in exclude:
                continue
            if d in SKIP_DIRS:
                run.ignored.append((sub, "tool or cache folder, not searched"))
            elif sub.is_symlink():
                run.ignored.append((sub, "symlinked folder, not followed"))
            elif depth + 1 > MAX_DEPTH:
                run.ignored.append((sub, f"deeper than {MAX_DEPTH} levels, not searched"))
            else:
                kept.append(d)
        dirnames[:] = kept
        for fname in sorted(filenames):
            path = here / fname
            count += 1
            if count > MAX_FILES_PER_RUN:
                run.ignored.append((here, f"more than {MAX_FILES_PER_RUN} files in the run; "
                                          "the rest was not searched"))
                warnings.add(f"stopped after {MAX_FILES_PER_RUN} files", path=str(root))
                return
            _sniff_file(run, path, real_root, collectors, warnings)


def _sniff_file(run: RunDir, path: Path, real_root: Path, collectors: Sequence[Collector],
                warnings: Warnings, explicit: bool = False) -> None:
    if path.is_symlink() and not explicit:
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            run.ignored.append((path, "broken symlink"))
            return
        if real_root != target and real_root not in target.parents:
            run.ignored.append((path, "symlink pointing outside the run folder, not followed"))
            return
    try:
        size = path.stat().st_size
    except OSError as exc:
        run.ignored.append((path, f"cannot stat: {exc.strerror or exc}"))
        return
    if not path.is_file():
        run.ignored.append((path, "not a regular file"))
        return
    if size == 0:
        run.ignored.append((path, "empty file"))
        what = _named_like(path.name)
        if what:   # an empty dump.json / compare result is worth saying, not just listing
            warnings.add(f"named like {what}, but the file is empty (0 bytes); ignored", path=str(path))
        return
    if size > MAX_SNIFF_BYTES:
        run.ignored.append((path, f"too large to inspect ({size / 1024 ** 3:.1f} GiB)"))
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        run.ignored.append((path, f"cannot read: {exc.strerror or exc}"))
        return
    compressed = compression_of(path, head)
    if compressed:
        # .gz / .zst: the collectors whose readers decompress on the fly; others read raw bytes
        collectors = [c for c in collectors if reads_of(c).compressed]
        try:
            head = read_head(path, HEAD_BYTES)
        except OSError as exc:
            why = exc.strerror or str(exc)
            run.ignored.append((path, f"{compressed}-compressed, not readable: {why}"))
            warnings.add(f"{compressed}-compressed file not readable: {why}", path=str(path))
            return
    claimed: list[Artefact] = []
    for collector in collectors:
        try:
            art = collector.sniff(path, head)
        except Exception as exc:  # a sniffer tripping on odd bytes must not stop discovery
            warnings.add(f"collector {getattr(collector, 'name', '?')} could not examine the file: "
                         f"{type(exc).__name__}: {exc}", path=str(path))
            continue
        if art is not None:
            claimed.append(art)
    if not claimed:
        own = _recognised_here(path, head)
        if own is not None:
            claimed.append(own)
    if claimed:
        run.artefacts.extend(claimed)
    else:
        why = _why_unrecognised(path, head)
        refused = _unsafe_yaml(path, head, size)
        if refused:
            why = f"YAML refused for safety ({refused})"
            warnings.add(f"{why}; ignored", path=str(path))
        elif compressed:
            why = f"{compressed}-compressed; the content: {why}"
        run.ignored.append((path, why))
        what = _named_like(path.name)
        if what and not refused:
            warnings.add(f"named like {what}, but its content is not recognised as one ({why}); ignored",
                         path=str(path))


def _unsafe_yaml(path: Path, head: bytes, size: int) -> str | None:
    """Why the strict YAML loader refuses an unrecognised .yaml/.yml file on safety grounds
    (alias bomb, recursive alias, a python/... or other non-standard tag), or None. Such a file
    is never silently ignored: it may be an msprobe mapping or config the user meant to give."""
    if not path.name.lower().endswith((".yaml", ".yml")) or size > len(head):
        return None
    from precdx.yamlsafe import load_yaml_text
    try:
        load_yaml_text(head.decode("utf-8", "replace"), str(path))
    except PrecdxError as exc:
        text = exc.message
        if "alias" in text.lower() or "construct not allowed" in text:
            return text
    return None


_MSPROBE_CONFIG_KEYS = re.compile(rb'"(task|dump_path|level|rank|step)"\s*:')
_MSPROBE_TASK = re.compile(rb'"task"\s*:\s*"([^"]*)"')
_MSPROBE_LEVEL = re.compile(rb'"level"\s*:\s*"([^"]*)"')


def _recognised_here(path: Path, head: bytes) -> Artefact | None:
    """Files worth naming in `precdx inspect` that no collector reads: msprobe's own
    configuration (config.json / msprobe_config.json: task, dump_path, level, rank, step)."""
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if path.suffix.lower() == ".json" and body.startswith(b"{"):
        keys = {m.group(1) for m in _MSPROBE_CONFIG_KEYS.finditer(body[:8192])}
        if {b"task", b"dump_path"} <= keys or ({b"task", b"level"} <= keys and b"msprobe" in path.name.encode()):
            task = _MSPROBE_TASK.search(body)
            level = _MSPROBE_LEVEL.search(body)
            detail = "/".join(m.group(1).decode("utf-8", "replace") for m in (task, level) if m)
            return Artefact(path, "msprobe.config", detail)
    return None


def _named_like(name: str) -> str | None:
    """What a file of this name usually is (an artefact kind a collector declares), or None."""
    for kind in artefact_kinds():
        if kind.named_like(name):
            return kind.what
    return None


def _why_unrecognised(path: Path, head: bytes) -> str:
    if b"\x00" in head[:4096]:
        return "binary file of no known format"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a multi-byte char cut at the 64 KiB edge is fine
            return "not UTF-8 text and no known binary format"
    return "text file whose content matches no known artefact format"


def _read_hosts(root: Path, warnings: Warnings) -> list[str]:
    """Hosts of a run from its hostfile (`HOST slots=N`, `HOST:N` or one host per line)."""
    for name in ("hosts.txt", "hostfile", "hostfile.txt", "hosts"):
        path = root / name
        if not path.is_file():
            continue
        try:
            text = path.read_bytes()[:1024 * 1024].decode("utf-8")
        except (OSError, UnicodeDecodeError):
            warnings.add("hostfile is not readable UTF-8 text; hosts unknown", path=str(path))
            return []
        hosts: list[str] = []
        for lineno, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = _HOST_LINE.match(line)
            if not m:
                warnings.add("hostfile line is not 'HOST slots=N'; skipped", path=str(path), line=lineno)
                continue
            if m.group(1) not in hosts:
                hosts.append(m.group(1))
        return hosts
    return []


def _head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(size)
    except OSError:
        return b""
