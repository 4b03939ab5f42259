"""Reading a request that carries facts as JSON, an archive of run folders (zip / tar, as the
body or as the `archive` part of a multipart form, beside a `facts` part holding the JSON), or
both; and unpacking that archive safely (engine/service/archive.py) for the time of one job."""
from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from fastapi import Request
from pydantic import BaseModel, ValidationError

from precdx.service.errors import ServiceError
from precdx.service.limits import check_json_depth
from precdx.service.settings import DEFAULT_MAX_JSON_DEPTH, Settings

ARCHIVE_TYPES = ("application/zip", "application/x-zip-compressed", "application/x-tar", "application/gzip",
                 "application/x-gzip", "application/x-bzip2", "application/x-xz", "application/octet-stream")
FORM_FIELDS = ("archive", "facts")


@dataclass
class Upload:
    """The parsed body (`model`), the archive's file (or None) and the form holding it."""

    body: Any
    archive: BinaryIO | None = None
    form: Any = None

    async def close(self) -> None:
        if self.form is not None:
            await self.form.close()
        elif self.archive is not None:
            self.archive.close()


async def read_upload(request: Request, settings: Settings, model: type[BaseModel]) -> Upload:
    """JSON (`model`, or a bare list of facts), multipart/form-data (archive, facts), or a zip /
    tar body. A body without a content type is read as JSON (none at all: an empty `model`)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    depth = settings.max_json_depth
    if ctype == "application/json" or ctype.endswith("+json"):
        return Upload(parse_body(model, await request.body(), depth))
    if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return await _read_form(request, settings, model)
    if ctype in ARCHIVE_TYPES:
        return Upload(model(), archive=await _spool(request))
    if not ctype:  # no content type: JSON, as FastAPI reads an undeclared body (or nothing)
        return Upload(parse_body(model, await request.body()))
    raise ServiceError(415, "unsupported_media_type",
                       "send JSON facts, multipart/form-data (archive, facts) or a zip/tar body")


def parse_body(model: type[BaseModel], raw: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH):
    if raw.strip():
        check_json_depth(raw, max_depth)  # 400 json_too_deep, as for every other body
    try:
        payload = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServiceError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if isinstance(payload, list):  # a bare list of facts is fine too
        payload = {"facts": payload}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        parts = [".".join(str(x) for x in e["loc"]) + f": {e['msg']}" for e in exc.errors()[:5]]
        raise ServiceError(422, "invalid_request", "; ".join(parts)) from None


async def _read_form(request: Request, settings: Settings, model: type[BaseModel]) -> Upload:
    from starlette.datastructures import UploadFile
    from starlette.formparsers import MultiPartException

    try:
        form = await request.form(max_files=1, max_fields=2, max_part_size=settings.max_request_bytes)
    except MultiPartException as exc:
        raise ServiceError(400, "bad_multipart", exc.message) from None
    except (ValueError, KeyError, AssertionError) as exc:
        raise ServiceError(400, "bad_multipart", f"the multipart body could not be parsed: {exc}") from None
    try:
        unknown = sorted(set(form.keys()) - set(FORM_FIELDS))
        if unknown:
            raise ServiceError(400, "bad_multipart", f"unknown form field(s) {unknown}: use 'archive' and 'facts'")
        archive = form.get("archive")
        if archive is not None and not isinstance(archive, UploadFile):
            raise ServiceError(400, "bad_multipart", "'archive' must be a file upload")
        facts = form.get("facts")
        if isinstance(facts, UploadFile):
            facts = await facts.read()
        body = parse_body(model, facts.encode() if isinstance(facts, str) else (facts or b""), settings.max_json_depth)
        return Upload(body, archive.file if archive is not None else None, form)
    except BaseException:
        await form.close()
        raise


async def _spool(request: Request) -> BinaryIO:
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    try:
        async for chunk in request.stream():
            spool.write(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


# ---------------------------------------------------------------- in the job
@dataclass
class Unpacked:
    """An extracted upload: the temporary folder and the case (or run) folder inside it."""

    tmp: str
    root: str
    single_run: bool = False  # no case layout: the upload is read as one run

    def inputs(self) -> dict:
        """What the upload holds, as precdx.api.gather() takes it: a case (baseline/ and target/),
        a target run (with its reruns) that came without a baseline, or one run folder."""
        dirs = {p.name.lower(): p for p in Path(self.root).iterdir() if p.is_dir()}
        if "target" in dirs and "baseline" not in dirs:
            return {"target": dirs["target"],
                    "target_reruns": [p for name, p in sorted(dirs.items()) if name.startswith("target_rerun")]}
        return {"case_dir": self.root}

    def require_recognised(self, case) -> None:
        """An upload read as one run must hold something precdx reads."""
        if self.single_run and case is not None and not any(run.artefacts for run in case.runs):
            raise ServiceError(422, "not_a_case", "the archive holds no case layout (baseline/ and target/ run "
                                                  "folders) and nothing precdx reads as one run (training logs, "
                                                  "configs, env listings, msprobe output)")

    def _pairs(self, escape: bool) -> list[tuple[str, str]]:
        pairs = [(self.root.rstrip("/") + "/", ""), (self.tmp.rstrip("/") + "/", ""), (self.tmp, "<upload>")]
        return [(json.dumps(a)[1:-1], b) for a, b in pairs] if escape else pairs

    def relative(self, text: str) -> str:
        """JSON text with the upload's paths made relative to the case (the server's folders
        never reach the client)."""
        for prefix, repl in self._pairs(escape=True):
            text = text.replace(prefix, repl)
        return text

    def relative_text(self, text: str | None) -> str | None:
        if text is None:
            return None
        for prefix, repl in self._pairs(escape=False):
            text = text.replace(prefix, repl)
        return text


@contextmanager
def unpacked(archive: BinaryIO, settings: Settings, deadline: float) -> Iterator[Unpacked]:
    """The archive extracted under the settings' limits into a temporary folder, removed after.
    Errors raised inside name paths relative to the upload."""
    from precdx.errors import PrecdxError
    from precdx.service.archive import Limits, case_root, extract

    tmp = tempfile.mkdtemp(prefix="precdx-upload-")
    try:
        extract(archive, Path(tmp), Limits(settings.max_extracted_bytes, settings.max_archive_files, deadline))
        root, single = _root(Path(tmp), case_root)
        up = Unpacked(tmp, str(root), single)
        try:
            yield up
        except PrecdxError as exc:
            exc.message = up.relative_text(exc.message) or ""
            exc.path = up.relative_text(exc.path) or None
            exc.hint = up.relative_text(exc.hint)
            exc.args = (exc.render(),)
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _root(folder: Path, case_root) -> tuple[Path, bool]:
    """The case folder of an upload (engine/service/archive.py), or else the one run it holds
    (the archive root, or the single folder wrapping everything); and whether it is one run."""
    try:
        return case_root(folder), False
    except ServiceError as exc:
        if exc.code != "not_a_case":
            raise
    current = folder
    while True:
        children = [p for p in current.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX"]
        if len(children) == 1 and children[0].is_dir():
            current = children[0]
            continue
        if not children:
            raise ServiceError(422, "not_a_case", "the archive holds no files")
        return current, True
