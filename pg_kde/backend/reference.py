"""The reference backend: NumPy in float64, the oracle every fast backend is tested against."""

from __future__ import annotations

import numpy as np

from .._slices import kde_terms, pair_terms

# Largest temporary the reference backend creates, in float64 elements (16 MiB): about 50 ms of NumPy work
# per block here (2-core AMD EPYC), which is also its slice when an interrupt check is given.
_REFERENCE_BLOCK = 1 << 21


def _row_blocks(n_rows: int, cost_per_row: float, interrupt=None, terms_per_row: float = 0.0):
    """Row blocks whose temporaries hold about _REFERENCE_BLOCK elements. With an interrupt check, blocks
    are also cut to about _REFERENCE_BLOCK pair terms (``terms_per_row``: several LSCV scales cost several
    passes over one temporary) and the check runs before each."""
    cost = max(cost_per_row, terms_per_row) if interrupt is not None else cost_per_row
    step = max(1, int(_REFERENCE_BLOCK // max(cost, 1)))
    for a in range(0, n_rows, step):
        if interrupt is not None:
            interrupt()
        yield a, min(n_rows, a + step)


class ReferenceBackend:
    """NumPy float64, chunked: slow, simple, the oracle every fast backend is tested against. Its row
    blocks are its slices (see :func:`_row_blocks`)."""

    name = "reference"

    @staticmethod
    def unavailable_reason():
        return None

    def plugin_pair_sum(self, x, g, order, dtype="float64", *, interrupt=None):
        x = np.asarray(x, dtype=np.float64)
        n = x.shape[0]
        total = 0.0
        for a, b in _row_blocks(n, n, interrupt):
            u = (x[a:b, None] - x[None, a:]) / g  # rows i in [a, b), columns j in [a, n)
            u2 = np.minimum(u * u, 1500.0)  # exp(-750) is 0 in float64; a far outlier's cubic stays finite
            if order == 2:
                poly = u2 - 1.0
            elif order == 4:
                poly = (u2 - 6.0) * u2 + 3.0
            else:
                poly = ((u2 - 15.0) * u2 + 45.0) * u2 - 15.0
            total += np.triu(poly * np.exp(-0.5 * u2), k=1).sum()  # keep j > i
        return float(total)

    def lscv_pair_sums(self, z, scales, w, derivative=False, dtype="float64", *, interrupt=None):
        z = np.asarray(z, dtype=np.float64)
        z = z.reshape(z.shape[0], -1)
        n, d = z.shape
        scales = np.asarray(scales, dtype=np.float64)
        a_sum = np.zeros(scales.shape[0])
        d_sum = np.zeros(scales.shape[0]) if derivative else None
        terms = n * pair_terms("lscv", d, scales.shape[0], derivative)
        for a, b in _row_blocks(n, n * d, interrupt, terms):
            diff = z[a:b, None, :] - z[None, a:, :]
            s = np.einsum("ijk,ijk->ij", diff, diff)[np.triu(np.ones((b - a, n - a), dtype=bool), k=1)]
            for m, scale in enumerate(scales):
                e = np.exp(-s * (scale / 4.0))
                a_sum[m] += np.sum(e * (1.0 - w * e))
                if derivative:
                    d_sum[m] += np.sum(s * e * (1.0 - 2.0 * w * e))
        return a_sum, d_sum

    def lscv_moments(self, z, w, dtype="float64", *, interrupt=None):
        z = np.asarray(z, dtype=np.float64)
        z = z.reshape(z.shape[0], -1)
        n, d = z.shape
        a_sum, m_sum = 0.0, np.zeros((d, d))
        for a, b in _row_blocks(n, n * d, interrupt, n * pair_terms("moments", d)):
            diff = z[a:b, None, :] - z[None, a:, :]
            u = diff[np.triu(np.ones((b - a, n - a), dtype=bool), k=1)]  # one row per pair i<j
            e = np.exp(-0.25 * np.einsum("pk,pk->p", u, u))
            a_sum += np.sum(e * (1.0 - w * e))
            m_sum += np.einsum("p,pa,pb->ab", e * (1.0 - 2.0 * w * e), u, u)
        return float(a_sum), m_sum

    def kde_sums(self, points, sample, dtype="float64", *, interrupt=None):
        points = np.asarray(points, dtype=np.float64)
        sample = np.asarray(sample, dtype=np.float64)
        points = points.reshape(points.shape[0], -1)
        sample = sample.reshape(sample.shape[0], -1)
        out = np.zeros(points.shape[0])
        terms = kde_terms(sample.shape[0], sample.shape[1])
        for a, b in _row_blocks(points.shape[0], sample.shape[0] * sample.shape[1], interrupt, terms):
            diff = points[a:b, None, :] - sample[None, :, :]
            out[a:b] = np.exp(-0.5 * np.einsum("ijk,ijk->ij", diff, diff)).sum(axis=1)
        return out
