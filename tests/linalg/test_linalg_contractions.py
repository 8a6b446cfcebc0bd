"""Contractions against numpy with operands of different shapes, views, chains and rules.

The lowering (permute + compact + reshape + GEMM through ``ex.run``) is the same on every
backend, so these run on each backend of this machine; WebGPU stores float32 only.
"""

from __future__ import annotations

import numpy as np
import pytest
from tenferro_host_linalg import cupy_missing_reason, dsl, einsum_chain, specs, tolerance

import tenferro_host as tf

RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got, want, op):
    rtol, atol = tolerance(op, "float32")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.fixture
def rt(host, backend_name):
    if backend_name == "cuda" and cupy_missing_reason() is not None:
        pytest.skip(cupy_missing_reason())
    return host.backend(backend_name)


EINSUMS = [
    ("ij,jk->ik", (3, 4), (4, 5)),
    ("ij,jk->ki", (3, 4), (4, 5)),
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),  # batch label first: permuted to the back
    ("ijb,jkb->ikb", (3, 4, 2), (4, 5, 2)),
    ("iaj,jbk->kbia", (2, 3, 4), (4, 5, 2)),
    ("ij,ij->", (3, 4), (3, 4)),
    ("ij,ij->i", (3, 4), (3, 4)),  # contraction with a batch label
    ("ijx,jk->ik", (3, 4, 2), (4, 5)),  # x only in a and not in the output: summed first
    ("i,j->ij", (3,), (4,)),  # outer product (k = 1)
    ("ba,ac", (2, 3), (3, 4)),  # implicit output 'bc'
    ("ij,jk->ik", (3, 0), (0, 5)),  # empty contraction: zeros
    ("ij,jk->ik", (0, 4), (4, 5)),  # empty output
]


@pytest.mark.parametrize(("spec", "sa", "sb"), EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_matches_numpy(host, rt, spec, sa, sb):
    a, b = _rand(*sa), _rand(*sb)
    got = host.run("linalg.einsum", rt.upload(a), rt.upload(b), spec=spec)
    want = np.einsum(spec, a, b)
    assert got.is_compact() and got.shape == want.shape
    assert got.shape == specs.EINSUM.signature.shape_rule(sa, sb, spec=spec)
    _close(got.download(), want, "linalg.einsum")


TENSORDOTS = [
    ((3, 4, 5), (4, 5, 2), 2),
    ((3, 4, 5), (5, 2), 1),
    ((3, 4), (5, 2), 0),
    ((3, 4, 5), (5, 3, 2), ((0, 2), (1, 0))),
    ((3, 4, 5), (4,), ([1], [0])),
]


@pytest.mark.parametrize(("sa", "sb", "axes"), TENSORDOTS, ids=[str(t[2]) for t in TENSORDOTS])
def test_tensordot_matches_numpy(host, rt, sa, sb, axes):
    a, b = _rand(*sa), _rand(*sb)
    got = host.run("linalg.tensordot", rt.upload(a), rt.upload(b), axes=axes)
    want = np.tensordot(a, b, axes)
    assert got.shape == want.shape == specs.TENSORDOT.signature.shape_rule(sa, sb, axes=axes)
    _close(got.download(), want, "linalg.tensordot")


def test_non_compact_views_are_contracted(host, rt):
    a, b = _rand(6, 4), _rand(5, 6)
    ta, tb = rt.upload(a), rt.upload(b)
    view_a, view_b = ta.T[::2], tb[1:, ::2]  # (2, 6) and (4, 3): both non-compact
    assert not view_a.is_compact() and not view_b.is_compact()
    got = host.run("linalg.matmul", view_a[:, 2:5], view_b[:3])
    _close(got.download(), a.T[::2][:, 2:5] @ b[1:, ::2][:3], "linalg.matmul")
    got = host.run("linalg.einsum", view_a, view_a, spec="ij,kj->ik")
    _close(got.download(), a.T[::2] @ a.T[::2].T, "linalg.einsum")


def test_matmul_of_rectangular_and_batched_operands(host, rt):
    a, b = _rand(3, 7), _rand(7, 2)
    _close(host.run("linalg.matmul", rt.upload(a), rt.upload(b)).download(), a @ b, "linalg.matmul")
    a, b = _rand(3, 7, 2, 3), _rand(7, 4, 2, 3)
    got = host.run("linalg.batched_matmul", rt.upload(a), rt.upload(b))
    _close(got.download(), np.einsum("ij...,jk...->ik...", a, b), "linalg.batched_matmul")


def test_einsum_chain_runs_in_one_session(rt):
    a, b, c = _rand(3, 4), _rand(4, 5, 2), _rand(5, 6)
    ta, tb, tc = rt.upload(a), rt.upload(b), rt.upload(c)
    with rt.session() as s:
        got = einsum_chain(s.exec_session(), "ij,jkb,kl->lib", ta, tb, tc)
    _close(got.download(), np.einsum("ij,jkb,kl->lib", a, b, c), "linalg.einsum")


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), (), -1])
def test_sum_and_norm_match_numpy(host, rt, axis):
    x = _rand(4, 3, 5)
    t = rt.upload(x)
    got = host.run("linalg.sum", t.permute(2, 0, 1), axis=axis)
    want = np.sum(x.transpose(2, 0, 1), axis=axis)
    assert got.shape == np.shape(want) == specs.SUM.signature.shape_rule((5, 4, 3), axis=axis)
    _close(got.download(), want, "linalg.sum")
    _close(
        host.run("linalg.norm", t[1:, ::2]).download(), np.linalg.norm(x[1:, ::2]), "linalg.norm"
    )


def test_dsl_variants_on_the_cpu_interpreter():
    """The DSL kernels run on the CPU interpreter too (the CPU's own variant is numpy)."""
    cpu = tf.Host().backend("cpu")
    a, b = np.random.default_rng(1).standard_normal((2, 5, 4, 2, 3)), _rand(1)
    with cpu.session() as s:
        ex = s.exec_session()
        ta = cpu.upload(a)
        got = dsl.batched_matmul(ex, ta, cpu.upload(a.transpose(1, 0, 2, 3, 4).copy()))
        np.testing.assert_allclose(
            got.download(),
            np.einsum("ij...,jk...->ik...", a, a.transpose(1, 0, 2, 3, 4)),
            rtol=1e-12,
        )
        m = cpu.upload(a[:, :, 0, 0, 0])
        np.testing.assert_allclose(
            dsl.matmul(ex, m.T, m).download(), a[:, :, 0, 0, 0].T @ a[:, :, 0, 0, 0], rtol=1e-12
        )
        np.testing.assert_allclose(
            dsl.sum(ex, ta, axis=(1, 3)).download(), a.sum(axis=(1, 3)), rtol=1e-12
        )
        np.testing.assert_allclose(dsl.norm(ex, ta).download(), np.linalg.norm(a), rtol=1e-12)
        assert dsl.sum(ex, cpu.upload(b[:0])).download() == 0.0


def test_factor_rules_and_canonical_forms(host):
    cpu = host.backend("cpu")
    a = RNG.standard_normal((5, 3)) + 1j * RNG.standard_normal((5, 3))
    q, r = host.run("linalg.qr", cpu.upload(a))
    u, s, vh = host.run("linalg.svd", cpu.upload(a.T.copy()))
    assert (q.shape, r.shape) == specs.QR.signature.shape_rule((5, 3))
    assert (u.shape, s.shape, vh.shape) == specs.SVD.signature.shape_rule((3, 5))
    assert [t.dtype for t in (u, s, vh)] == list(specs.SVD.signature.dtype_rule(tf.complex128))
    q, r, u, s, vh = (t.download() for t in (q, r, u, s, vh))
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    d = np.diag(r)
    assert np.allclose(d.imag, 0) and np.all(d.real >= 0)
    np.testing.assert_allclose((u * s) @ vh, a.T, atol=1e-12)
    pivots = u[np.argmax(np.abs(u), axis=0), np.arange(3)]
    assert np.allclose(pivots.imag, 0) and np.all(pivots.real > 0)
    assert host.run("linalg.norm", cpu.upload(a)).dtype == tf.float64
