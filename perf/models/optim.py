"""Optimizers that also take sparse COO gradients, for the sparse=True variants of the models."""
import torch


class Several:
    """Steps several optimizers as one (each over its own parameters)."""

    def __init__(self, *optimizers):
        self.optimizers = optimizers

    def zero_grad(self, set_to_none=False):
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self):
        for o in self.optimizers:
            o.step()


def adam(model, lr, sparse):
    """Adam; with sparse embeddings, torch.optim.SparseAdam for those (Adam rejects sparse
    gradients) and Adam for the rest, the usual way to train such a model."""
    if not sparse:
        return torch.optim.Adam(model.parameters(), lr=lr)
    sparse_params = [m.weight for m in model.modules() if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
                     and m.sparse]
    ids = {id(p) for p in sparse_params}
    dense_params = [p for p in model.parameters() if id(p) not in ids]
    return Several(torch.optim.SparseAdam(sparse_params, lr=lr), torch.optim.Adam(dense_params, lr=lr))
