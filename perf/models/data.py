"""Deterministic training data for the models of this package, from files that ship with Debian.

Nothing here draws random numbers: the corpora are read in a fixed order and tokenized by fixed
rules, and the samplers take the caller's generator, so the recorder (one generator for all
simulated workers) and the DDP benchmark (one per rank) decide the streams.
"""
import collections
import gzip
import hashlib
import os
import re
import subprocess
import sys

import numpy as np

LICENSES_DIR = "/usr/share/common-licenses"
# The Linux man-pages project (6.03 in Debian 12): its English pages are the largest body of
# prose a Debian machine has that belongs to packages of fixed content ("all" architecture, one
# version in bookworm), so the corpus, and with it the transformer's trace, is the same on every
# machine that ran scripts/install-deps.sh.
MAN_PACKAGES = ("manpages", "manpages-dev")


def regular_files(directory):
    """Regular files of a directory (symlinks skipped) in name order."""
    return sorted(f for f in os.listdir(directory)
                  if os.path.isfile(os.path.join(directory, f)) and not os.path.islink(os.path.join(directory, f)))


def read_licenses(directory=LICENSES_DIR):
    """The licence texts concatenated in name order: (file names, text)."""
    files = regular_files(directory)
    if not files:
        sys.exit(f"models: no files in {directory}")
    text = "".join(open(os.path.join(directory, f), encoding="utf-8", errors="replace").read() for f in files)
    return files, text


def package_man_pages(packages=MAN_PACKAGES):
    """The gzip-compressed English man pages (/usr/share/man/manN/) that dpkg lists for the packages,
    regular files only (the .so link pages and symlinks would repeat text), sorted by path."""
    files = set()
    for pkg in packages:
        out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"models: package {pkg} is not installed (scripts/install-deps.sh installs it)")
        files.update(f for f in out.stdout.splitlines() if re.fullmatch(r"/usr/share/man/man[^/]+/[^/]+\.gz", f))
    missing = [f for f in files if not os.path.lexists(f)]
    if missing:
        sys.exit(f"models: {len(missing)} of the {len(files)} man pages dpkg lists for {', '.join(packages)} are not "
                 f"on disk, e.g. {missing[0]} (a dpkg path-exclude for /usr/share/man, as in minimal container images?)")
    return sorted(f for f in files if os.path.isfile(f) and not os.path.islink(f))


def package_versions(packages):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Version}\n", *packages], capture_output=True, text=True)
    return out.stdout.strip().replace("\n", ", ")


_ROFF = [
    (re.compile(r'(?m)^[.\'][ \t]*\\".*$'), ""),                 # comment lines
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), " "),                # font changes \fB \fR \f(CW \f[I]
    (re.compile(r"\\\(..|\\\[[^\]]*\]"), " "),                   # special characters \(em \[aq]
    (re.compile(r"\\-"), "-"),
    (re.compile(r"\\[&|^%e ~0]"), " "),                          # zero-width and spacing escapes
    (re.compile(r"(?m)^[.\'][ \t]*[A-Za-z]+"), " "),             # request or macro name; its arguments stay
]


def roff_to_text(source):
    """Man page source to plain words: requests' names, font and spacing escapes removed."""
    for pattern, repl in _ROFF:
        source = pattern.sub(repl, source)
    return source


def read_man_corpus(packages=MAN_PACKAGES, licenses_dir=LICENSES_DIR):
    """The packages' man pages as text, then the licence texts: (file count, text)."""
    pages = package_man_pages(packages)
    parts = [roff_to_text(gzip.open(p).read().decode("utf-8", errors="replace")) for p in pages]
    lic_files, lic_text = read_licenses(licenses_dir)
    return len(pages) + len(lic_files), "".join(parts) + lic_text


def tokenize_words(text):
    """The LSTM's tokenizer (kept as it was: its trace must not change): lower-cased words with an
    optional apostrophe part, numbers, and every other non-space character on its own."""
    return re.findall(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[^\sa-z0-9]", text.lower())


def tokenize_identifiers(text):
    """The transformer's tokenizer: case kept and C identifiers whole (pthread_mutex_lock, O_RDONLY),
    as man pages are full of them; numbers, and every other non-space character on its own."""
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:'[A-Za-z]+)?|[0-9]+|[^\sA-Za-z0-9_]", text)


class Vocabulary:
    """The `size` most frequent tokens (ties by token), ids in order of decreasing frequency
    (id 0 = most frequent), plus <unk> as the last id; the corpus as a tensor of ids."""

    def __init__(self, tokens, size):
        import torch
        self.counts = collections.Counter(tokens)
        self.words = [w for w, _ in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))][:size]
        index = {w: i for i, w in enumerate(self.words)}
        self.unk = len(self.words)
        self.size = len(self.words) + 1
        self.ids = torch.tensor([index.get(t, self.unk) for t in tokens], dtype=torch.long)
        freq = torch.zeros(self.size)
        for w, c in self.counts.items():
            freq[index.get(w, self.unk)] += c
        self.unigram = freq / freq.sum()


def text_sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_windows(ids, rng, count, span):
    """`count` random windows of `span` consecutive ids: inputs (all but the last) and targets
    (shifted by one)."""
    import torch
    starts = rng.integers(0, ids.numel() - span, size=count)
    seq = torch.stack([ids[s: s + span] for s in starts])
    return seq[:, :-1], seq[:, 1:]


class ZipfIds:
    """Ids 0..rows-1 with P(k) proportional to 1/(k+1)^alpha: the popularity law of categorical
    values in click logs. Id 0 is the most popular; ids stay in popularity order, as after the
    usual preprocessing that numbers categories by frequency, so hot rows sit together."""

    def __init__(self, rows, alpha):
        weights = 1.0 / np.arange(1, rows + 1, dtype=np.float64) ** alpha
        self.cdf = np.cumsum(weights / weights.sum())
        self.rows = rows

    def draw(self, rng, n):
        return np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"), self.rows - 1)
