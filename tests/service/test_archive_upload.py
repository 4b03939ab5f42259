"""Uploaded archives: a real case unpacks and is diagnosed; hostile archives (path traversal,
absolute paths, symlinks, hard links, devices, zip and gzip bombs, too many files) are refused
with 4xx and nothing lands outside the extraction folder."""
from __future__ import annotations

import io
import json
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from precdx.service.archive import Limits, case_root, extract, safe_parts
from precdx.service.errors import ServiceError
from tests.service.conftest import tar_bytes, zip_bytes

LIMITS = Limits(max_bytes=1_000_000, max_files=100)


def _extract(data: bytes, dest: Path, limits: Limits = LIMITS):
    dest.mkdir(exist_ok=True)
    return extract(io.BytesIO(data), dest, limits)


def _files_outside(root: Path, dest: Path) -> list[Path]:
    return [p for p in root.rglob("*") if dest not in p.parents and p != dest]


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/etc/evil.txt", "C:\\evil.txt",
                                  "..\\evil.txt"])
@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_member_names_that_leave_the_folder_are_refused(tmp_path, name, kind):
    data = zip_bytes({name: b"x"}) if kind == "zip" else tar_bytes([(name, b"x")])
    with pytest.raises(ServiceError) as err:
        _extract(data, tmp_path / "out")
    assert err.value.status == 400
    assert not _files_outside(tmp_path, tmp_path / "out")


def test_safe_parts_refuses_nul_and_overlong_names():
    for name in ("ok/\x00.txt", "", "a/" * 40 + "b", "x" * 300):
        with pytest.raises(ServiceError):
            safe_parts(name)


def test_safe_parts_normalises_harmless_names():
    assert safe_parts("./case/target/train.log") == ("case", "target", "train.log")
    assert safe_parts("case\\baseline\\env.txt") == ("case", "baseline", "env.txt")


def _zip_with_mode(name: str, mode: int, data: bytes = b"target") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        info.create_system = 3
        zf.writestr(info, data)
    return buf.getvalue()


def test_zip_symlink_is_refused(tmp_path):
    with pytest.raises(ServiceError, match="symbolic link") as err:
        _extract(_zip_with_mode("case/target/train.log", stat.S_IFLNK | 0o777, b"/etc/passwd"), tmp_path / "out")
    assert err.value.status == 400


def test_zip_device_is_refused(tmp_path):
    with pytest.raises(ServiceError, match="not a plain file") as err:
        _extract(_zip_with_mode("dev", stat.S_IFCHR | 0o600), tmp_path / "out")
    assert err.value.status == 400


def _tar_special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize("info,why", [
    (_tar_special("case/target/train.log", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
    (_tar_special("case/target/link", tarfile.SYMTYPE, "../../.."), "symbolic link"),
    (_tar_special("case/target/train.log", tarfile.LNKTYPE, "/etc/passwd"), "hard link"),
    (_tar_special("case/null", tarfile.CHRTYPE), "device"),
    (_tar_special("case/sda", tarfile.BLKTYPE), "device"),
    (_tar_special("case/fifo", tarfile.FIFOTYPE), "device"),
])
def test_tar_links_and_special_files_are_refused(tmp_path, info, why):
    with pytest.raises(ServiceError, match=why) as err:
        _extract(tar_bytes([("case/baseline/a.txt", b"a"), info]), tmp_path / "out")
    assert err.value.status == 400
    assert not any(p.is_symlink() for p in (tmp_path / "out").rglob("*"))


def test_zip_bomb_stops_at_the_byte_limit(tmp_path):
    bomb = zip_bytes({"case/target/train.log": b"\0" * 20_000_000})
    assert len(bomb) < 100_000  # 20 MB of zeros compress to almost nothing
    started = time.monotonic()
    with pytest.raises(ServiceError) as err:
        _extract(bomb, tmp_path / "out")
    assert err.value.status == 413
    assert sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file()) <= LIMITS.max_bytes
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz"])
def test_compressed_tar_bomb_stops_at_the_byte_limit(tmp_path, mode):
    bomb = tar_bytes([("case/target/train.log", b"\0" * 5_000_000)], mode=mode)
    with pytest.raises(ServiceError) as err:
        _extract(bomb, tmp_path / "out")
    assert err.value.status == 413


def test_many_small_members_stop_at_the_file_limit(tmp_path):
    many = zip_bytes({f"case/target/f{i}.txt": b"x" for i in range(150)})
    with pytest.raises(ServiceError, match="more than 100 files") as err:
        _extract(many, tmp_path / "out")
    assert err.value.status == 413
    many_tar = tar_bytes([(f"case/target/f{i}.txt", b"x") for i in range(150)])
    with pytest.raises(ServiceError, match="more than 100 files"):
        _extract(many_tar, tmp_path / "out2")


def test_duplicate_and_colliding_members_are_refused(tmp_path):
    dup = tar_bytes([("case/a.txt", b"1"), ("case/a.txt", b"2")])
    with pytest.raises(ServiceError, match="appears twice"):
        _extract(dup, tmp_path / "out")
    clash = tar_bytes([("case/a", b"1"), ("case/a/b.txt", b"2")])
    with pytest.raises(ServiceError, match="file as a folder"):
        _extract(clash, tmp_path / "out2")


def test_deadline_stops_extraction(tmp_path):
    data = zip_bytes({"case/target/train.log": b"x" * 10})
    with pytest.raises(ServiceError) as err:
        _extract(data, tmp_path / "out", Limits(1_000_000, 100, deadline=time.monotonic() - 1))
    assert err.value.status == 408


@pytest.mark.parametrize("data,status", [(b"just some text, not an archive", 415), (b"PK\x03\x04broken", 400),
                                         (b"\x1f\x8b\x08\x00broken gzip", 400), (b"BZhnot bzip", 400)])
def test_garbage_is_refused(tmp_path, data, status):
    with pytest.raises(ServiceError) as err:
        _extract(data, tmp_path / "out")
    assert err.value.status == status


def test_case_root_finds_the_case_inside_one_wrapping_folder(tmp_path):
    _extract(tar_bytes([("case-07/baseline/train.log", b"x"), ("case-07/target/train.log", b"y")]), tmp_path / "out")
    assert case_root(tmp_path / "out") == tmp_path / "out" / "case-07"
    _extract(zip_bytes({"runs/notes.txt": b"x"}), tmp_path / "out2")
    with pytest.raises(ServiceError) as err:
        case_root(tmp_path / "out2")
    assert err.value.status == 422


# ---------------------------------------------------------------- over HTTP
def _case_zip(case: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(case.rglob("*")):
            if path.is_file() and path.name != "expected.yaml":
                zf.write(path, f"{case.name}/{path.relative_to(case)}")
    return buf.getvalue()


def _small_case(shared_dir: Path) -> Path:
    cases = [c for c in sorted((shared_dir / "scenarios").glob("case-*"))
             if (c / "baseline" / "train.log").is_file() and (c / "target" / "train.log").is_file()]
    if not cases:
        pytest.skip("no scenario case with logs")
    return min(cases, key=lambda c: sum(p.stat().st_size for p in c.rglob("*") if p.is_file()))


def test_uploaded_case_is_diagnosed_with_paths_relative_to_the_case(client, shared_dir):
    case = _small_case(shared_dir)
    data = _case_zip(case)
    r = client.post("/v1/diagnose", files={"archive": ("case.zip", data, "application/zip")},
                    data={"facts": json.dumps([{"type": "observation", "name": "kshift_off_fixes", "value": True}])})
    assert r.status_code == 200, r.text
    body = r.json()
    roles = {f["role"] for f in body["facts"] if f["type"] == "run"}
    assert {"baseline", "target"} <= roles
    assert body["hypotheses"][0]["failure_mode"] == "operator.matmul_kshift"  # the answer given with the upload
    assert "precdx-upload-" not in r.text  # no server temp paths leak into the report
    # the same archive as a raw body, as markdown
    r = client.post("/v1/diagnose?format=markdown", content=data, headers={"content-type": "application/zip"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")


def test_uploaded_tarball_is_diagnosed(client, shared_dir):
    case = _small_case(shared_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path in sorted(p for p in case.rglob("*") if p.is_file() and p.name != "expected.yaml"):
            tf.add(path, f"{path.relative_to(case)}")
    r = client.post("/v1/diagnose", content=buf.getvalue(), headers={"content-type": "application/gzip"})
    assert r.status_code == 200, r.text
    assert any(f["type"] == "run" for f in r.json()["facts"])


@pytest.mark.parametrize("archive,status,why", [
    (zip_bytes({"../../evil.txt": b"x"}), 400, "outside the archive"),
    (tar_bytes([_tar_special("case/target/train.log", tarfile.SYMTYPE, "/etc/passwd")]), 400, "symbolic link"),
    (tar_bytes([_tar_special("case/target/train.log", tarfile.LNKTYPE, "/etc/passwd")]), 400, "hard link"),
    (zip_bytes({"case/target/train.log": b"\0" * 3_000_000}), 413, "more than 1000000 bytes"),
    (tar_bytes([("case/target/train.log", b"\0" * 3_000_000)]), 413, "more than 1000000 bytes"),
    (b"not an archive", 415, "not a zip or tar"),
    (zip_bytes({"readme.txt": b"hello"}), 422, "no case layout"),
])
def test_hostile_uploads_get_4xx_json(tmp_path, archive, status, why):
    from fastapi.testclient import TestClient

    from precdx.service.app import create_app
    from tests.service.conftest import make_settings

    app = create_app(make_settings(tmp_path, max_extracted_bytes=1_000_000))
    with TestClient(app) as c:
        r = c.post("/v1/diagnose", files={"archive": ("x", archive, "application/octet-stream")})
        assert r.status_code == status, r.text
        assert set(r.json()) == {"error", "detail"} and why in r.json()["detail"]
        r = c.post("/v1/diagnose", content=archive, headers={"content-type": "application/octet-stream"})
        assert r.status_code == status and why in r.json()["detail"], r.text
    assert not (tmp_path.parent / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
