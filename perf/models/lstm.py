"""lstm: a small word-level LSTM language model on the licence texts of /usr/share/common-licenses.

Embedding -> 1-layer LSTM -> linear decoder over the vocabulary. With the sampled softmax (the
default) only the decoder rows of the batch's targets and of the sampled negatives get a gradient,
as in large-vocabulary LM training, so embedding and decoder are both row-sparse and the LSTM is
dense. The defaults are those of perf/data/lstm-lm.sgtrace: this module was moved here from
scripts/make-gradient-trace without changing any computation or the order of any random draw,
so that trace regenerates byte for byte.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data, optim

NAME = "lstm"
DEFAULTS = dict(
    workers=4, warmup=100, steps=20, seed=1,
    corpus_dir=data.LICENSES_DIR,
    vocab=10000,          # most frequent words kept (+ <unk>)
    embed=64, hidden=32,
    batch=8,              # sequences per worker per step
    bptt=32,              # tokens per sequence
    softmax="sampled",    # or "full": softmax over the whole vocabulary, dense decoder gradient
    negatives=64,         # sampled negatives per worker and step
    lr=3e-3, clip=1.0,    # Adam, gradient norm clipped before the step
    layout="model",       # trace in model parameter order (the file predates the DDP layout)
)


class LM(nn.Module):
    def __init__(self, vocab, embed, hidden, noise, negatives, sparse=False):
        super().__init__()
        self.hidden_size = hidden
        self.noise = noise            # unigram^0.75 sampling distribution (not a parameter)
        self.negatives = negatives
        self.embedding = nn.Embedding(vocab, embed, sparse=sparse)
        self.lstm = nn.LSTM(embed, hidden, num_layers=1, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, x, y, negatives=None):
        """Mean cross-entropy of the next word; sampled softmax when `negatives` are given."""
        h = self.lstm(self.embedding(x))[0].reshape(-1, self.hidden_size)
        y = y.reshape(-1)
        if negatives is None:
            return F.cross_entropy(self.decoder(h), y)
        # Sampled softmax over the batch's targets plus shared negatives, with the log-Q
        # correction; only the candidates' decoder rows get a gradient.
        cand, target = torch.unique(torch.cat([y, negatives]), return_inverse=True)
        target = target[: y.numel()]
        q = 1.0 - (1.0 - self.noise[cand]).pow(self.negatives)
        logits = h @ self.decoder.weight[cand].t() + self.decoder.bias[cand] - q.log()
        return F.cross_entropy(logits, target)


class Task:
    """The model with its data: the recorder and the DDP benchmark both go through this."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.files, text = data.read_licenses(cfg["corpus_dir"])
        self.corpus_sha = data.text_sha256(text)
        self.tokens = data.tokenize_words(text)
        self.vocab = data.Vocabulary(self.tokens, cfg["vocab"])
        noise = self.vocab.unigram.pow(0.75)
        noise /= noise.sum()
        self.noise = noise

    def model(self, sparse=False):
        c = self.cfg
        return LM(self.vocab.size, c["embed"], c["hidden"], self.noise, c["negatives"], sparse)

    def optimizer(self, model, sparse=False):
        return optim.adam(model, self.cfg["lr"], sparse)

    def eval_batch(self, rng):
        """A fixed batch for the full-softmax loss printed before and after training."""
        return data.text_windows(self.vocab.ids, rng, self.cfg["batch"], self.cfg["bptt"] + 1) + (None,)

    def batch(self, rng, gen):
        """One worker's batch: windows from `rng`, negatives from the torch generator `gen`."""
        x, y = data.text_windows(self.vocab.ids, rng, self.cfg["batch"], self.cfg["bptt"] + 1)
        negatives = None
        if self.cfg["softmax"] == "sampled":
            negatives = torch.multinomial(self.noise, self.cfg["negatives"], replacement=True, generator=gen)
        return x, y, negatives

    def summary(self):
        v = self.vocab
        return (f"corpus: {len(self.files)} files, {len(self.tokens)} tokens, {len(v.counts)} distinct, "
                f"sha256 {self.corpus_sha}")

    def description(self):
        c, v = self.cfg, self.vocab
        negatives = f" {c['negatives']} negatives" if c["softmax"] == "sampled" else ""
        return (f"word-level LSTM LM (embedding {c['embed']}, 1-layer LSTM {c['hidden']}, linear decoder, "
                f"{c['softmax']} softmax{negatives}), "
                f"vocabulary {v.size} ({len(v.words)} words + <unk>), Adam lr {c['lr']}; corpus "
                f"{c['corpus_dir']} ({len(self.files)} files, {len(self.tokens)} tokens, sha256 {self.corpus_sha[:16]}); "
                f"{c['workers']} workers x batch {c['batch']}x{c['bptt']}, steps {c['warmup']}..{c['warmup'] + c['steps'] - 1} "
                f"after {c['warmup']} warm-up steps, seed {c['seed']}; values bf16")
