#!/usr/bin/env python3
"""Regenerate engine/rulepack/data/msprobe_cli.json from the installed msprobe (mindstudio-probe).

The command lint (engine/rulepack/commands.py) checks every `msprobe <sub-command> ...` in rules/
and kb/ against this snapshot, so CI needs no msprobe. Run it after upgrading mindstudio-probe:

    pip install mindstudio-probe==26.2.0
    python tools/msprobe_cli_snapshot.py            # writes the JSON
    python tools/msprobe_cli_snapshot.py --check    # exit 1 if the committed JSON is stale

The sub-command parsers are built the way msprobe.py builds them (same parser functions), so
the options are the tool's own argparse definitions. The PrecisionDebugger config.json keys are
read from the common and task config classes (json_config.get("...") calls).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "engine" / "rulepack" / "data" / "msprobe_cli.json"

# sub-command -> (module, parser function), as wired in msprobe/msprobe.py
SUBCOMMANDS = {
    "compare": ("msprobe.core.compare.utils", "_compare_parser"),
    "merge_result": ("msprobe.core.compare.merge_result.merge_result_cli", "_merge_result_parser"),
    "overflow_check": ("msprobe.overflow_check.analyzer", "_overflow_check_parser"),
    "config_check": ("msprobe.core.config_check.config_check_cli", "_config_checking_parser"),
    "graph_visualize": ("msprobe.visualization.graph_service", "_graph_service_parser"),
    "data2db": ("msprobe.core.compare.data2db", "_data2db_service_parser"),
    "parse": ("msprobe.core.parse.parse_cli", "_parse_parser"),
    "offline_dump": ("msprobe.infer.offline.compare.msquickcmp.main", "_offline_dump_parser"),
    "install_deps": ("msprobe.core.install_deps.install_deps", "_install_deps_parser"),
    # acc_check / multi_acc_check dispatch on the dump's framework; the PyTorch parser is the one
    # documented for training (multi_acc_check adds -n/--num_splits)
    "acc_check": ("msprobe.pytorch.api_accuracy_checker.acc_check.acc_check", "_acc_check_parser"),
    "multi_acc_check": ("msprobe.pytorch.api_accuracy_checker.acc_check.acc_check", "_acc_check_parser"),
    "api_precision_compare": ("msprobe.pytorch.api_accuracy_checker.compare.api_precision_compare",
                              "_api_precision_compare_parser"),
}


def _options(parser: argparse.ArgumentParser) -> list[dict]:
    out = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        choices = None
        if action.choices is not None:
            try:
                choices = [str(c) for c in action.choices] if len(list(action.choices)) <= 32 else None
            except TypeError:
                choices = None
        nargs = action.nargs
        takes_value = not (isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                                                 argparse._HelpAction, argparse._StoreConstAction,
                                                 argparse._CountAction)) or nargs == 0)
        out.append({"flags": list(action.option_strings), "dest": action.dest,
                    "takes_value": takes_value, "nargs": None if nargs is None else str(nargs),
                    "choices": choices})
    return sorted(out, key=lambda o: o["flags"][0])


def snapshot() -> dict:
    import msprobe
    from msprobe.core.common.cli_help import MindStudioArgumentParser

    root = Path(msprobe.__file__).resolve().parent
    sys.path.append(str(root / "msaccucmp"))  # msprobe.py does the same before importing parsers
    version = "unknown"
    try:
        from importlib.metadata import version as dist_version
        version = dist_version("mindstudio-probe")
    except Exception:  # pragma: no cover - metadata missing
        pass
    subs = {}
    for name, (module, func) in SUBCOMMANDS.items():
        parser = MindStudioArgumentParser(prog=f"msprobe {name}")
        getattr(importlib.import_module(module), func)(parser)
        if name == "multi_acc_check":
            parser.add_argument("-n", "--num_splits", type=int)
        subs[name] = _options(parser)
    from msprobe.core.common.const import Const

    common_src = (root / "core" / "dump" / "common_config.py").read_text(encoding="utf-8")
    task_src = common_src[common_src.index("class BaseConfig"):]
    common_src = common_src[common_src.index("class CommonConfig"):common_src.index("class BaseConfig")]
    task_src += (root / "pytorch" / "dump" / "pt_config.py").read_text(encoding="utf-8")
    get = re.compile(r'json_config\.get\(\s*["\'](\w+)["\']')
    keys = {
        "common": sorted(set(get.findall(common_src)) | {"load"}),   # LoadConfig reads json_config["load"]
        "task": sorted(set(get.findall(task_src))),
        "task_names": sorted(Const.TASK_LIST),
        "levels": sorted({Const.LEVEL_L0, Const.LEVEL_L1, Const.LEVEL_L2, Const.LEVEL_MIX, Const.LEVEL_DEBUG}),
        "summary_modes": sorted(Const.SUMMARY_MODE),
        "risk_levels": sorted(Const.RISK_LEVEL_LIST),
    }
    return {"tool": "msprobe", "package": "mindstudio-probe", "version": version,
            "generated_by": "tools/msprobe_cli_snapshot.py", "subcommands": subs, "config_keys": keys}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed snapshot, write nothing")
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    data = snapshot()
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if args.check:
        old = Path(args.output).read_text(encoding="utf-8") if os.path.exists(args.output) else ""
        if old != text:
            print(f"{args.output} is stale: rerun tools/msprobe_cli_snapshot.py", file=sys.stderr)
            return 1
        print("msprobe CLI snapshot is current")
        return 0
    Path(args.output).write_text(text, encoding="utf-8")
    print(f"wrote {args.output}: msprobe {data['version']}, {len(data['subcommands'])} sub-commands")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
