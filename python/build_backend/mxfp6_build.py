"""A PEP 517 build backend with no requirements, so `pip install ./python` works offline.

pip builds in an isolated environment into which it installs the backend's requirements; with
setuptools as the backend that means a download. This backend needs only the standard library: it
zips the pure-Python package into a wheel (PEP 427) with its metadata, and records the checkout it
was built from so the installed package finds the libraries of that checkout's build tree.
"""

import base64
import hashlib
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "mxfp6"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section = text.split("[project]", 1)[1]
    fields = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', section, re.M))
    return fields["name"], fields["version"], fields.get("description", ""), fields.get("requires-python", "")


def _dist_info(name, version):
    return f"{name}-{version}.dist-info"


def _metadata(name, version, summary, requires_python):
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    return "\n".join(lines) + "\n"


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: mxfp6_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _files():
    """The package's files (path in the wheel -> bytes), with _checkout.py naming the checkout."""
    out = {}
    source = os.path.join(ROOT, PACKAGE)
    for directory, dirs, names in os.walk(source):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for n in sorted(names):
            if n.endswith(".py"):
                full = os.path.join(directory, n)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                out[rel] = open(full, "rb").read()
    checkout = os.path.dirname(ROOT)
    out[f"{PACKAGE}/_checkout.py"] = (
        '"""The checkout this package was built from (written by the build backend)."""\n'
        f"CHECKOUT = {checkout!r}\n"
    ).encode()
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, summary, requires_python = _project()
    info = os.path.join(metadata_directory, _dist_info(name, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(name, version, summary, requires_python))
    with open(os.path.join(info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return os.path.basename(info)


def _build(wheel_directory, files):
    name, version, summary, requires_python = _project()
    info = _dist_info(name, version)
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata(name, version, summary, requires_python).encode()
    files[f"{info}/WHEEL"] = _wheel_file().encode()
    record = [_record_line(p, d) for p, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(wheel_directory, _files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file putting the checkout's python/ on sys.path: edits take effect without a reinstall.
    return _build(wheel_directory, {f"_{PACKAGE}_editable.pth": (ROOT + "\n").encode()})


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel
