"""Wheel build hook (pyproject.toml, [tool.hatch.build.targets.wheel.hooks.custom]): a wheel
built where a C compiler is carries the block reader's compiled kernels.

scan.c (engine/collectors/logs/) is compiled by tools/build_native.py's build() into a temporary
folder and force-included next to the packaged scan.c, under the name native.library_name()
gives for that source and this platform (what precdx.collectors.logs.native looks for first), and
the wheel is then tagged for this platform (py3-none-<platform>: the library has no Python API). With no compiler, a failed compile, or
PRECDX_NATIVE=0 at build time, the wheel is the pure one (py3-none-any, scan.c only) and one line
says why: the installed package reads logs with numpy, or finds a library that
`python tools/build_native.py --cache` built. A library left next to the source by `make setup`
is never packed (the wheel target excludes `_scan-*`): only the one compiled here goes in.
Editable installs are left alone: they run the checkout, where tools/build_native.py builds.

The build environment holds only hatchling (not numpy, pydantic, ...): the tool is loaded from its
file and needs nothing beyond the standard library.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "engine/collectors/logs/scan.c"  # relative to the project root
TOOL = "tools/build_native.py"


class NativeKernelsHook(BuildHookInterface):
    PLUGIN_NAME = "custom"
    _tmp: str | None = None  # the folder the library is compiled into, removed after the build

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        why = self._include(build_data)
        if why:
            self.app.display_warning(f"precdx: wheel built without the block reader's C kernels ({why}); "
                                     "an install of it reads logs with numpy (same results, slower)")

    def _include(self, build_data: dict[str, Any]) -> str:
        """Compile scan.c and add the library to the wheel; '' when done, else why not."""
        root = Path(self.root)
        source = root / SOURCE
        try:
            tool = _load_tool(root / TOOL)
        except (ImportError, OSError) as exc:
            return f"{TOOL} cannot be loaded: {exc}"
        if tool.native._off():
            return "PRECDX_NATIVE=0"
        name = tool.native.library_name(source)
        self._tmp = tempfile.mkdtemp(prefix="precdx-native-")
        try:
            built = tool.build(force=True, source=source, targets=[Path(self._tmp) / name])
        except RuntimeError as exc:
            return str(exc)
        # next to scan.c as the wheel places it (the target's sources map engine/ to precdx/)
        packaged = self.build_config.get_distribution_path(Path(SOURCE).with_name(name).as_posix())
        build_data["force_include"][str(built)] = packaged
        build_data["pure_python"] = False
        # The library is loaded with ctypes (no Python C API): any Python 3 on this platform.
        build_data["tag"] = f"py3-none-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
        return ""

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _load_tool(path: Path):
    """tools/build_native.py as a module (tools/ is not a package), leaving sys.path as it was."""
    saved = sys.path[:]
    try:
        spec = importlib.util.spec_from_file_location("_precdx_build_native", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no module at {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved
