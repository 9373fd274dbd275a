"""A drafter's temperature calibration: the scale at which its races with the target agree most.

A sampled request's drafts race on the request's sampling noise (:mod:`specpath_drafting.coupling`):
at temperature T the target emits ``argmax(l_t + T G)`` and the drafter drafts
``argmax(l_q + T s G)`` on the same Gumbel noise ``G``. A head trained to imitate the target ends
softer than it (a small model spreads probability where the target is sure), so the two agree
most at some ``s < 1``. This fits ``s`` on held-out windows of a data directory, from the head's
teacher-forced first draft against the target's distribution (race agreement averaged over a few
temperatures, a grid of scales, fixed noise), and writes it into the checkpoint's ``config.json``
(``specpath_temperature_scale``), where the engine reads it. Greedy decoding is untouched.

    python -m specpath_train.calibrate --head DIR --data DATA [--windows 48] [--write]

EAGLE-3 heads and MTP modules (their first draft: from the states of the target's taps or last
layer), DFlash and DSpark drafters (the first draft of a block, anchored at every position: what
the block's walk starts from; DSpark's with the Markov bias of its anchor).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

SCALES = tuple(round(0.5 + 0.05 * i, 2) for i in range(17))  # 0.50 .. 1.30
TEMPERATURES = (0.6, 0.8, 1.0)


def race_agreement(draft_logits: torch.Tensor, draft_ids: torch.Tensor, target_logits: torch.Tensor,
                   temperature: float, scales: Sequence[float], *, draws: int = 3, seed: int = 0,
                   chunk: int = 1024) -> list[float]:
    """Per scale, how often the draft's race (``draft_logits`` [P, Vd] over the target ids
    ``draft_ids`` [Vd]) picks the target's race winner (``target_logits`` [P, V]) on the same
    noise at ``temperature``: ``draws`` noise draws per position, the same for every scale."""
    from specpath_drafting.coupling import race

    gen = torch.Generator().manual_seed(seed)
    hits = [0.0] * len(scales)
    for c in range(0, target_logits.shape[0], chunk):
        t, q = target_logits[c:c + chunk].float(), draft_logits[c:c + chunk].float()
        for _ in range(draws):
            g = -torch.log(-torch.log(torch.rand(t.shape, generator=gen).clamp_min(1e-20)))  # [P, V]
            win = race(t, [temperature] * t.shape[0], g)  # the target's sample
            for i, s in enumerate(scales):  # the drafter's, by the rule it drafts with
                drafted = race(q, [temperature * s] * q.shape[0], g, vocab_ids=draft_ids)
                hits[i] += float((draft_ids[drafted] == win).sum()) / draws
    return [h / target_logits.shape[0] for h in hits]


def fit_scale(draft_logits: torch.Tensor, draft_ids: torch.Tensor, target_logits: torch.Tensor, *,
              temperatures: Sequence[float] = TEMPERATURES, scales: Sequence[float] = SCALES,
              seed: int = 0) -> tuple[float, dict[str, list[float]]]:
    """(the scale with the highest race agreement averaged over ``temperatures``, the agreement
    per temperature and scale)."""
    table = {f"{t:g}": race_agreement(draft_logits, draft_ids, target_logits, t, scales, seed=seed) for t in temperatures}
    mean = [sum(row[i] for row in table.values()) / len(table) for i in range(len(scales))]
    return float(scales[max(range(len(scales)), key=mean.__getitem__)]), table


def target_logits(final: torch.Tensor, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float) -> torch.Tensor:
    """float32 ``[..., V]``: the target's next-token logits from its last layer's output ``final``
    (final norm, head)."""
    x = final.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w) @ head_w.T


def first_draft_logits(head_dir: str | Path, target_dir: str | Path, data_dir: str | Path,
                       windows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(draft logits [P, Vd], their target ids [Vd], target logits [P, V]) of the first draft
    at every position of the first ``windows`` held-out windows, teacher-forced."""
    from specpath_drafting.rollout import depth_pass
    from specpath_train.target_text import load_dataset
    from specpath_train.trainer import load_target_parts

    config, emb_w, norm_w, head_w = load_target_parts(str(target_dir), data_dir)
    n = config["num_hidden_layers"]
    eps = config.get("rms_norm_eps", 1e-6)
    kind = json.loads((Path(head_dir) / "config.json").read_text()).get("model_type")
    embed = lambda ids: F.embedding(ids, emb_w)  # noqa: E731
    if kind == "eagle3":
        from specpath_drafting.config import default_aux_layer_ids, engine_layers
        from specpath_drafting.heads import load_head_weights, read_head_config
        from specpath_eagle3.head import Eagle3Head

        head = load_head_weights(Eagle3Head(read_head_config(head_dir, "eagle3"), embed_tokens=embed), head_dir)
        layers = (*engine_layers(default_aux_layer_ids(n)), n - 1)
        ids = head.draft_ids
    elif kind == "mtp":
        from specpath_drafting.vocab import checkpoint_train_vocab
        from specpath_mtp.module import load_mtp_modules

        # served over the ids its training scored (specpath_drafting.vocab.serving_lm_head), as here
        ids = checkpoint_train_vocab(head_dir, config["vocab_size"])
        ids = torch.arange(config["vocab_size"]) if ids is None else ids
        rows = head_w[ids]
        head = load_mtp_modules(head_dir, embed_tokens=embed, lm_head=lambda x: x.float() @ rows.T)[0]
        layers = (n - 1,)
    elif kind in ("dflash", "dspark"):
        return block_first_draft_logits(head_dir, config, emb_w, norm_w, head_w, data_dir, windows)
    else:
        raise ValueError(f"{head_dir}: model_type {kind!r}; calibrate fits EAGLE-3 heads, MTP modules and "
                         "DFlash / DSpark drafters")
    data = load_dataset(data_dir, layers)
    held = min(windows, data["heldout"])
    tokens, taps = data["tokens"][:held], data["taps"][:held].float()
    head = head.float().eval()
    with torch.no_grad():
        final = taps[:, :, -1]
        p = tokens.shape[1] - 2
        cos, sin = head.rope(torch.arange(p))
        if kind == "eagle3":  # reads the states entering the taps, predicts position q+2
            a = depth_pass(head, head.embed(tokens[:, 1:p + 1]), head.fuse(taps[:, :p, :-1]), cos, sin, [])
        else:  # reads the target's last state at q and the token at q+1, predicts q+2
            a = depth_pass(head, head.embed(tokens[:, 1:p + 1]), final[:, :p], cos, sin, [])
        draft = head.logits(a).reshape(-1, ids.shape[0])
        target = target_logits(final[:, 1:p + 1].reshape(-1, final.shape[-1]), norm_w, head_w, eps)
    return draft.float(), ids, target


def block_first_draft_logits(head_dir: str | Path, config: dict, emb_w: torch.Tensor, norm_w: torch.Tensor,
                             head_w: torch.Tensor, data_dir: str | Path, windows: int, *,
                             chunk: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`first_draft_logits` of a DFlash or DSpark drafter: a block anchored at every position
    of the held-out windows that leaves room for its K labels (``chunk`` windows a pass)."""
    from specpath_drafting.block.drafter import DFlashDrafter, load_weights, read_config
    from specpath_drafting.vocab import checkpoint_train_vocab
    from specpath_train.block import block_batch
    from specpath_train.target_text import load_dataset

    dc = read_config(head_dir)
    if dc.kind == "dspark":
        from specpath_dspark.drafter import DSparkDrafter as module
    else:
        module = DFlashDrafter
    ids = checkpoint_train_vocab(head_dir, config["vocab_size"])  # served over these ids, as here
    ids = torch.arange(config["vocab_size"]) if ids is None else ids
    rows = head_w[ids]
    drafter = module(dc, embed_tokens=lambda t: F.embedding(t, emb_w), lm_head=lambda h: h.float() @ rows.T)
    drafter = load_weights(drafter, head_dir).float().eval()
    if dc.kind == "dspark":
        drafter.markov_columns = ids
    k, n = dc.num_draft_tokens, config["num_hidden_layers"]
    data = load_dataset(data_dir, (*dc.target_layer_ids, n - 1))
    held = min(windows, data["heldout"])
    eps = config.get("rms_norm_eps", 1e-6)
    draft, target = [], []
    with torch.no_grad():
        for c in range(0, held, chunk):
            tokens, taps = data["tokens"][c:min(held, c + chunk)], data["taps"][c:min(held, c + chunk)].float()
            s, w = tokens.shape
            anchors = torch.arange(1, w - k).expand(s, -1).contiguous()  # [S, A]: every anchor with K labels
            b = block_batch(drafter, tokens, taps, anchors, k)
            logits = drafter.logits(b.hidden[:, :, 0])  # [S, A, n]: the first draft
            if dc.kind == "dspark":
                logits = logits + drafter.markov_bias(b.prev[:, :, 0])
            draft.append(logits.reshape(-1, ids.shape[0]))
            target.append(target_logits(b.target_final[:, :, 0], norm_w, head_w, eps).reshape(-1, head_w.shape[0]))
    return torch.cat(draft), ids, torch.cat(target)


CALIBRATED_KINDS = ("eagle3", "mtp", "dflash", "dspark")
"""The drafters' ``model_type`` values a scale is fitted for (what :func:`first_draft_logits` reads)."""


def calibrate_checkpoint(head: str | Path, target: str | Path, data: str | Path, *, windows: int = 48,
                         write: bool = False) -> dict:
    """Fit ``head``'s scale on the first ``windows`` held-out windows of ``data`` (and, with
    ``write``, record it in its ``config.json``); returns ``scale``, ``positions`` and the race
    agreement per temperature at scale 1 and at the fitted scale."""
    from specpath_drafting.checkpoints import TEMPERATURE_SCALE_KEY

    draft, ids, target_logits = first_draft_logits(head, target, data, windows)
    scale, table = fit_scale(draft, ids, target_logits)
    one, best = SCALES.index(1.0), SCALES.index(scale)
    if write:
        path = Path(head) / "config.json"
        config = json.loads(path.read_text())
        config[TEMPERATURE_SCALE_KEY] = scale
        path.write_text(json.dumps(config, indent=2) + "\n")
    return {"scale": scale, "positions": int(draft.shape[0]),
            "agreement_at_1": {t: round(row[one], 4) for t, row in table.items()},
            "agreement": {t: round(row[best], 4) for t, row in table.items()},
            "table": {t: {f"{s:g}": round(v, 4) for s, v in zip(SCALES, row)} for t, row in table.items()}}


def data_target(data: str | Path, target: str | None) -> Path:
    """The target's checkpoint directory: ``target`` (a directory, a named model or a GGUF file,
    as ``specpath train --target`` takes it), else the one the data names (``target_path`` in its
    ``features.json``, or its run's ``run.json``); a one-line ``ValueError`` where there is none or
    it is not the target the data was made with."""
    from specpath_train.cli_train import resolve_target
    from specpath_train.selfdistill import target_digest
    from specpath_train.trainer import file_digest

    data = Path(data)
    meta_path = data / "features.json"
    if not meta_path.is_file():
        raise ValueError(f"{data}: not a finished data directory (no features.json)")
    meta = json.loads(meta_path.read_text())
    run = data.parent / "run.json"
    if target is None:
        target = meta.get("target_path") or (json.loads(run.read_text())["target"] if run.is_file() else None)
        if target is None:
            raise ValueError(f"{data}: neither its features.json nor a run.json beside it names the target; give --target")
    try:
        path, _ = resolve_target(str(target), data.parent, lambda _: None)
    except Exception as e:  # noqa: BLE001 - the train CLI's one-line error
        raise ValueError(str(e).removeprefix("--target ")) from None
    made_with = meta.get("key", {}).get("target")
    weights = path / "model.safetensors"
    # specpath train's data key the whole checkpoint (selfdistill), target_text.build_dataset's its weights file
    if made_with is not None and made_with != target_digest(path) and not (
            weights.is_file() and made_with == file_digest(weights)):
        raise ValueError(f"{data}: made with other target weights than {target}")
    return path


def main(argv: list[str] | None = None) -> int:
    from specpath_drafting.checkpoints import TEMPERATURE_SCALE_KEY

    p = argparse.ArgumentParser(prog="python -m specpath_train.calibrate", description=__doc__.splitlines()[0])
    p.add_argument("--head", required=True, help="the drafter checkpoint (EAGLE-3 head, MTP modules, DFlash or DSpark drafter)")
    p.add_argument("--target", default=None,
                   help="the target (checkpoint directory, named model or GGUF file; default: the one the data's run names)")
    p.add_argument("--data", required=True, help="a data directory of the same target (its held-out windows)")
    p.add_argument("--windows", type=int, default=48, help="held-out windows read (default 48)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--write", action="store_true", help=f"write the scale into the head's config.json ({TEMPERATURE_SCALE_KEY})")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        if args.windows < 1:
            raise ValueError(f"--windows {args.windows}: at least 1")
        if not (Path(args.head) / "config.json").is_file():
            raise ValueError(f"--head {args.head}: not a drafter checkpoint (no config.json)")
        target = data_target(args.data, args.target)
        fit = calibrate_checkpoint(args.head, target, args.data, windows=args.windows, write=args.write)
    except (ValueError, KeyError, OSError) as e:
        p.exit(2, f"{p.prog}: error: {' '.join(str(e).split())}\n")
    scale = fit["scale"]
    for t in fit["table"]:
        print(f"T={t}: race agreement {fit['agreement_at_1'][t]:.4f} at scale 1, {fit['agreement'][t]:.4f} at {scale}")
    print(json.dumps({"head": str(args.head), "scale": scale, "positions": fit["positions"], "agreement": fit["table"]}))
    if args.write:
        print(f"{Path(args.head) / 'config.json'}: {TEMPERATURE_SCALE_KEY} = {scale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
