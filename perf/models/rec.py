"""rec: an embedding-heavy click-through model in the style of DLRM (Naumov et al. 2019).

Eight categorical features, each looked up in its own embedding table (26.9 M parameters,
102.6 MiB of fp32 gradient in all), thirteen dense features through a bottom MLP, the pairwise
dot products of the nine resulting vectors (DLRM's interaction) concatenated with the bottom
MLP's output, and a top MLP giving the click logit.

The data is generated, as for a click log: every feature's ids follow a Zipf law (data.ZipfIds),
so every worker's batch hits the same hot rows and a long tail of rarely seen ones; dense
features are standard normal; the click is drawn from a fixed random "true" model (a weight per
id of every feature plus a linear term in the dense features), so the loss falls as on real logs.
One id per feature and sample (one-hot, as in Criteo), so a batch of B samples touches at most
B rows of each table and the rest of the table's gradient is zero.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data

NAME = "rec"
DEFAULTS = dict(
    workers=8, warmup=30, steps=2, seed=1,
    # (rows, Zipf exponent) per categorical feature: a few large tables with a flatter law and
    # small ones with a steeper one, as in click logs.
    tables=((1_000_000, 1.05), (300_000, 1.1), (200_000, 1.1), (100_000, 1.2),
            (50_000, 1.2), (20_000, 1.3), (10_000, 1.3), (1_000, 1.5)),
    dim=16,                     # embedding width = bottom MLP output width
    dense_features=13,
    bottom=(512, 256), top=(512, 256),
    batch=2048,                 # samples per worker per step
    lr=0.05, clip=0.0,          # Adagrad, no clipping (plain SGD at lr 0.5-3 barely moved the loss in 40 steps)
    layout="ddp",
)


def mlp(widths, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, tables, dim, dense_features, bottom, top, sparse=False):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(rows, dim, sparse=sparse) for rows, _ in tables)
        for e in self.embeddings:
            nn.init.normal_(e.weight, std=0.1)   # N(0, 1) rows would make the dot products explode
        self.bottom = mlp((dense_features, *bottom, dim), last_relu=True)
        n = len(tables) + 1
        self.top = mlp((dim + n * (n - 1) // 2, *top, 1), last_relu=False)
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.pairs = (li, lj)   # not a buffer: DDP would broadcast it every step

    def forward(self, dense, ids, clicks):
        """Mean binary cross-entropy of the click logits."""
        x = self.bottom(dense)
        vectors = torch.stack([x] + [e(ids[:, f]) for f, e in enumerate(self.embeddings)], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        logit = self.top(torch.cat([x, dots], dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logit, clicks)


class Task:
    """The model with its data: the recorder and the DDP benchmark both go through this."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.samplers = [data.ZipfIds(rows, alpha) for rows, alpha in cfg["tables"]]
        # The hidden model that decides the clicks: its own generator, so it is the same for
        # every worker and rank and does not move the batches' stream.
        truth = np.random.Generator(np.random.PCG64(cfg["seed"] + 1000))
        nfeat = len(cfg["tables"])
        self.true_row = [truth.standard_normal(rows) * (1.5 / np.sqrt(nfeat)) for rows, _ in cfg["tables"]]
        self.true_dense = truth.standard_normal(cfg["dense_features"]) / np.sqrt(cfg["dense_features"])
        self.true_bias = -1.0   # clicks are the minority class

    def model(self, sparse=False):
        c = self.cfg
        return DLRM(c["tables"], c["dim"], c["dense_features"], c["bottom"], c["top"], sparse)

    def optimizer(self, model, sparse=False):
        """Adagrad: takes dense and sparse COO gradients alike (rows without a gradient do not move)."""
        return torch.optim.Adagrad(model.parameters(), lr=self.cfg["lr"])

    def batch(self, rng, gen=None):
        """One worker's batch (dense features, ids [batch x features], clicks), all from `rng`."""
        n = self.cfg["batch"]
        ids = np.stack([s.draw(rng, n) for s in self.samplers], axis=1)
        dense = rng.standard_normal((n, self.cfg["dense_features"]))
        logit = self.true_bias + dense @ self.true_dense
        for f, table in enumerate(self.true_row):
            logit = logit + table[ids[:, f]]
        clicks = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        return (torch.from_numpy(dense.astype(np.float32)), torch.from_numpy(ids.astype(np.int64)),
                torch.from_numpy(clicks.astype(np.float32)))

    def eval_batch(self, rng):
        return self.batch(rng)

    def summary(self):
        rows = sum(r for r, _ in self.cfg["tables"])
        return (f"data: {len(self.cfg['tables'])} Zipf-distributed categorical features ({rows} ids in all), "
                f"{self.cfg['dense_features']} dense features, clicks from a fixed random model")

    def description(self):
        c = self.cfg
        tables = " ".join(f"{r}/{a}" for r, a in c["tables"])
        return (f"DLRM-style click model: {len(c['tables'])} embedding tables x {c['dim']} (rows/Zipf exponent: "
                f"{tables}), bottom MLP {c['dense_features']}-{'-'.join(map(str, c['bottom']))}-{c['dim']}, "
                f"dot interactions, top MLP {'-'.join(map(str, c['top']))}-1; generated click log, "
                f"Adagrad lr {c['lr']}; {c['workers']} workers x batch {c['batch']}, "
                f"steps {c['warmup']}..{c['warmup'] + c['steps'] - 1} after {c['warmup']} warm-up steps, "
                f"seed {c['seed']}; values bf16")
