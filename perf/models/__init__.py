"""The three models sparcoll measures itself on, one definition each, shared by
scripts/make-gradient-trace (gradient traces) and perf/ddp_step_bench.py (DDP step time).

Each module has NAME, DEFAULTS (hyperparameters and recorder settings) and a Task(cfg) that
reads or generates the data and builds the model:
  task.model(sparse)             the nn.Module; model(*batch) returns the mean loss (so DDP's
                                 forward is the loss); sparse=True gives its embeddings sparse
                                 COO gradients
  task.batch(rng, gen)           one worker's batch from a NumPy Generator (and a torch Generator
                                 for the LSTM's sampled negatives)
  task.optimizer(model, sparse)  what the recorder and the benchmark train with
"""
from . import lstm, rec, transformer

MODULES = {m.NAME: m for m in (rec, transformer, lstm)}


def config(name, **overrides):
    """The model's DEFAULTS with `overrides` applied (None values ignored); unknown keys fail."""
    cfg = dict(MODULES[name].DEFAULTS)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in cfg:
            raise SystemExit(f"models: {name} has no setting {key!r} (settings: {', '.join(sorted(cfg))})")
        cfg[key] = value
    return cfg


def task(name, cfg=None):
    return MODULES[name].Task(cfg if cfg is not None else config(name))
