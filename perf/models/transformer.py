"""transformer: a decoder-only (causal) transformer language model on Debian's man pages.

Token embedding (vocabulary 30 001) + learned positions -> 4 pre-norm transformer layers
(256 wide, 4 heads, GELU feed-forward 1024) -> final LayerNorm -> a linear output projection over the
whole vocabulary. Input embedding and output projection are untied: the embedding's gradient
has only the rows of the batch's tokens (it can be a sparse COO gradient with sparse=True), the
projection and the layers are dense. 18.5 M parameters, 70.6 MiB of fp32 gradient.

Data: the English man pages of the Linux man-pages project (Debian packages manpages and
manpages-dev) with their roff markup removed, then the licence texts of /usr/share/common-licenses
(data.read_man_corpus); words tokenized with case kept and C identifiers whole
(data.tokenize_identifiers): 1 368 497 tokens, 30 369 distinct. The vocabulary is the 30 000 most
frequent (ties by token) plus <unk>, which stands for the 369 tokens seen once and left out
(0.027% of the text).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data, optim

NAME = "transformer"
DEFAULTS = dict(
    workers=8, warmup=20, steps=2, seed=1,
    vocab=30000,
    d_model=256, layers=4, heads=4, ffn=1024,
    context=64,                # tokens per sequence
    batch=8,                   # sequences per worker per step
    lr=1e-3, clip=1.0,         # Adam, gradient norm clipped before the step
    layout="ddp",
)


class TransformerLM(nn.Module):
    def __init__(self, vocab, d_model, layers, heads, ffn, context, sparse=False):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model, sparse=sparse)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.position = nn.Parameter(torch.randn(context, d_model) * 0.02)
        # Layers built one by one (nn.TransformerEncoder deep-copies one layer: equal weights).
        # GELU as in GPT and BERT: with torch's default ReLU, up to 45% of a layer's feed-forward
        # units had no active token in a worker's batch, so their rows of the gradient were zero,
        # a sparsity real language models do not have.
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.decoder = nn.Linear(d_model, vocab)
        # Causal mask, not a buffer: DDP would broadcast buffers before every forward.
        self.mask = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)

    def forward(self, x, y):
        """Mean cross-entropy of the next token over the whole vocabulary."""
        t = x.shape[1]
        h = self.embedding(x) + self.position[:t]
        for layer in self.layers:
            h = layer(h, src_mask=self.mask[:t, :t])
        logits = self.decoder(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


class Task:
    """The model with its data: the recorder and the DDP benchmark both go through this."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.files, text = data.read_man_corpus()
        self.corpus_sha = data.text_sha256(text)
        self.versions = data.package_versions(data.MAN_PACKAGES)
        self.tokens = data.tokenize_identifiers(text)
        self.vocab = data.Vocabulary(self.tokens, cfg["vocab"])
        if len(self.vocab.words) < cfg["vocab"]:
            raise SystemExit(f"transformer: the corpus has {len(self.vocab.words)} distinct tokens, fewer than the "
                             f"vocabulary of {cfg['vocab']} (different man pages installed? {self.versions})")

    def model(self, sparse=False):
        c = self.cfg
        return TransformerLM(self.vocab.size, c["d_model"], c["layers"], c["heads"], c["ffn"], c["context"], sparse)

    def optimizer(self, model, sparse=False):
        return optim.adam(model, self.cfg["lr"], sparse)

    def batch(self, rng, gen=None):
        return data.text_windows(self.vocab.ids, rng, self.cfg["batch"], self.cfg["context"] + 1)

    def eval_batch(self, rng):
        return self.batch(rng)

    def summary(self):
        v = self.vocab
        unk = float((v.ids == v.unk).float().mean())
        return (f"corpus: {self.files} files ({self.versions}; common-licenses), {len(self.tokens)} tokens, "
                f"{len(v.counts)} distinct, <unk> {unk:.4%} of tokens, sha256 {self.corpus_sha}")

    def description(self):
        c, v = self.cfg, self.vocab
        return (f"causal transformer LM (untied embedding {v.size}x{c['d_model']}, learned positions, {c['layers']} "
                f"pre-norm layers, {c['heads']} heads, GELU feed-forward {c['ffn']}, full-softmax output projection), "
                f"vocabulary {v.size} ({len(v.words)} tokens + <unk>), Adam lr {c['lr']}; corpus man pages of "
                f"{self.versions} and common-licenses ({self.files} files, {len(self.tokens)} tokens, sha256 "
                f"{self.corpus_sha[:16]}); {c['workers']} workers x batch {c['batch']}x{c['context']}, "
                f"steps {c['warmup']}..{c['warmup'] + c['steps'] - 1} after {c['warmup']} warm-up steps, "
                f"seed {c['seed']}; values bf16")
