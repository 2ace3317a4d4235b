#!/usr/bin/env python3
"""Trains Medusa-1 draft heads for a frozen target on features from
`kvfleet dump-hidden`, and writes them for `--spec-draft-heads`.

Head i (0-based) reads the hidden state h that produced token t+1 and
guesses token t+2+i:  h_i = h + SiLU(W_i h + b_i),  logits = E h_i, with E
the target's own output head restricted to the draft vocabulary (the most
frequent next tokens of the training answers). W_i starts at zero, so an
untrained head repeats the target's own guess. Cross-entropy over the draft
vocabulary, Adam, minibatches; rows whose target token is outside the draft
vocabulary are skipped. Checkpoints (--checkpoint) let training resume.

  python3 tools/heads/train_heads.py --features /tmp/heads/train --heldout /tmp/heads/heldout \\
      --out heads/smollm2-135m-instruct --heads 3 --vocab 4096 --epochs 3
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np

import safetensors_io


def load_features(directory: Path):
    f = safetensors_io.read(directory / "features.safetensors")
    meta = json.loads((directory / "meta.json").read_text())
    return f["hidden"].astype(np.float32), f["next_token"].astype(np.int64), f["sequence"].astype(np.int64), meta


def targets(next_token, sequence, heads: int) -> np.ndarray:
    """[heads, N]: the token t+2+i for head i at each row, -1 past the answer's end."""
    n = len(next_token)
    out = np.full((heads, n), -1, dtype=np.int64)
    for i in range(heads):
        shift = i + 1
        ok = np.zeros(n, dtype=bool)
        ok[: n - shift] = sequence[shift:] == sequence[: n - shift]
        out[i, : n - shift] = np.where(ok[: n - shift], next_token[shift:], -1)
    return out


def silu(u):
    return u / (1.0 + np.exp(-u))


def forward(x, w, b, e):
    u = x @ w.T + b
    h = x + silu(u)
    return u, h, h @ e.T


def accuracy(x, y, w, b, e, batch=2048):
    """Top-1 agreement of one head with its target tokens (indices into the draft vocabulary)."""
    hits, total = 0, 0
    keep = y >= 0
    x, y = x[keep], y[keep]
    for s in range(0, len(x), batch):
        _, _, logits = forward(x[s : s + batch], w, b, e)
        hits += int((logits.argmax(1) == y[s : s + batch]).sum())
        total += len(y[s : s + batch])
    return hits / max(total, 1), total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--features", type=Path, required=True, help="a `kvfleet dump-hidden` directory")
    p.add_argument("--heldout", type=Path, help="another, of held-out prompts, for the acceptance report")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--vocab", type=int, default=4096, help="draft vocabulary size")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max-rows", type=int, default=200000, help="cap on training rows (data size)")
    p.add_argument("--max-seconds", type=float, default=3600, help="cap on training wall time")
    p.add_argument("--checkpoint", type=Path, help="resume from and save to this .npz")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    started = time.time()
    rng = np.random.default_rng(a.seed)

    x, next_token, sequence, meta = load_features(a.features)
    x, next_token, sequence = x[: a.max_rows], next_token[: a.max_rows], sequence[: a.max_rows]
    head = safetensors_io.read(a.features / "lm_head.safetensors")["weight"]
    counts = np.bincount(next_token, minlength=head.shape[0])
    vocab_ids = np.sort(np.argsort(-counts, kind="stable")[: a.vocab])
    index = np.full(head.shape[0], -1, dtype=np.int64)
    index[vocab_ids] = np.arange(len(vocab_ids))
    e = head[vocab_ids].astype(np.float32)
    y_all = targets(next_token, sequence, a.heads)
    y_all = np.where(y_all >= 0, index[np.maximum(y_all, 0)], -1)
    hidden = x.shape[1]

    w = np.zeros((a.heads, hidden, hidden), dtype=np.float32)
    b = np.zeros((a.heads, hidden), dtype=np.float32)
    m_w, v_w, m_b, v_b = (np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b))
    step = 0
    if a.checkpoint and a.checkpoint.exists():
        c = np.load(a.checkpoint)
        w, b, m_w, v_w, m_b, v_b, step = c["w"], c["b"], c["m_w"], c["v_w"], c["m_b"], c["v_b"], int(c["step"])
        print(f"resumed from {a.checkpoint} at step {step}")

    rows = np.arange(len(x))
    steps = int(a.epochs * len(x) / a.batch)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    while step < steps and time.time() - started < a.max_seconds:
        batch = rng.choice(rows, size=a.batch, replace=False)
        xb = x[batch]
        step += 1
        for i in range(a.heads):
            yb = y_all[i, batch]
            keep = yb >= 0
            if not keep.any():
                continue
            u, h, logits = forward(xb[keep], w[i], b[i], e)
            logits -= logits.max(1, keepdims=True)
            prob = np.exp(logits)
            prob /= prob.sum(1, keepdims=True)
            prob[np.arange(len(prob)), yb[keep]] -= 1.0
            prob /= len(prob)
            d_h = prob @ e
            sig = 1.0 / (1.0 + np.exp(-u))
            d_u = d_h * sig * (1.0 + u * (1.0 - sig))
            g_w, g_b = d_u.T @ xb[keep], d_u.sum(0)
            for param, grad, m, v in ((w[i], g_w, m_w[i], v_w[i]), (b[i], g_b, m_b[i], v_b[i])):
                m *= beta1
                m += (1 - beta1) * grad
                v *= beta2
                v += (1 - beta2) * grad * grad
                param -= a.lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + eps)
        if step % 200 == 0 or step == steps:
            print(f"step {step}/{steps}, {time.time() - started:.0f} s", flush=True)
            if a.checkpoint:
                np.savez(a.checkpoint, w=w, b=b, m_w=m_w, v_w=v_w, m_b=m_b, v_b=v_b, step=step)

    record = {"rows": int(len(x)), "answers": int(meta["prompts"]), "steps": step, "planned_steps": steps,
              "batch": a.batch, "lr": a.lr, "epochs": a.epochs, "seconds": round(time.time() - started, 1),
              "vocab": int(len(vocab_ids)),
              "vocab_coverage": round(float(counts[vocab_ids].sum() / counts.sum()), 4)}
    if a.heldout:
        hx, hnext, hseq, _ = load_features(a.heldout)
        hy = targets(hnext, hseq, a.heads)
        hy = np.where(hy >= 0, index[np.maximum(hy, 0)], -1)
        # Chained acceptance: head i's guess counts only when heads 0..i-1 were right too.
        right = np.ones(len(hx), dtype=bool)
        per_position = []
        for i in range(a.heads):
            keep = hy[i] >= 0
            guess = np.full(len(hx), -2, dtype=np.int64)
            for s in range(0, len(hx), 2048):
                guess[s : s + 2048] = forward(hx[s : s + 2048], w[i], b[i], e)[2].argmax(1)
            hit = (guess == hy[i]) & keep
            right &= hit
            per_position.append({"head": i, "top1": round(float(hit[keep].mean()), 4),
                                 "chained": round(float(right[keep].mean()), 4)})
        record["heldout"] = {"rows": int(len(hx)), "per_position": per_position}
    print(json.dumps(record, indent=2))

    a.out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for i in range(a.heads):
        tensors[f"head.{i}.weight"] = w[i].astype(np.float16)
        tensors[f"head.{i}.bias"] = b[i].astype(np.float16)
    safetensors_io.write(a.out / "heads.safetensors", tensors)
    config = {"format": "kvfleet-draft-heads-v1", "kind": "medusa-1", "target_fingerprint": meta["target_fingerprint"],
              "target": Path(meta["model"]).name, "hidden_size": hidden, "num_heads": a.heads,
              "vocab_ids": [int(t) for t in vocab_ids], "training": record}
    (a.out / "config.json").write_text(json.dumps(config) + "\n")


if __name__ == "__main__":
    main()
