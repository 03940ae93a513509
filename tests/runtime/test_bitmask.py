"""Bitmask helpers and every kernel against a slow, obvious reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fsmcompile.runtime import allocate_token_bitmask, apply_token_bitmask_inplace
from fsmcompile.runtime.kernels import choose_backend, triton_available
from fsmcompile.runtime.kernels import numpy as numpy_kernel
from fsmcompile.runtime.kernels import torch as torch_kernel
from fsmcompile.tables.bits import unpack_row


def reference_apply(logits: np.ndarray, bitmask: np.ndarray, indices) -> np.ndarray:
    """Row by row, token by token: unpack_row gives the allowed set; the rest is -inf."""
    out = logits.astype(np.float64).copy()
    vocab = out.shape[1]
    rows = range(out.shape[0]) if indices is None else list(indices)
    for i, row in enumerate(rows):
        allowed = np.zeros(vocab, dtype=bool)
        bits = unpack_row(bitmask[i], min(vocab, bitmask.shape[1] * 32))
        allowed[: bits.shape[0]] = bits
        out[row, ~allowed] = -np.inf
    return out


def random_case(rng, batch, vocab, words, num_indices=None):
    logits = rng.standard_normal((batch, vocab)).astype(np.float32)
    rows = batch if num_indices is None else num_indices
    bitmask = rng.integers(-(2**31), 2**31, size=(rows, words), dtype=np.int64).astype(np.int32)
    bitmask[0, 0] = -1  # one all-allowed word
    if rows > 1:
        bitmask[1, :] = 0  # one row allowing nothing
    indices = None
    if num_indices is not None:
        indices = sorted(rng.choice(batch, size=num_indices, replace=False).tolist())
        rng.shuffle(indices)
    return logits, bitmask, indices


# (vocab, words): exact, logits narrower than the bitmask, logits wider than it.
SHAPES = [(64, 2), (70, 3), (100, 2), (33, 1)]


@pytest.mark.parametrize(("vocab", "words"), SHAPES)
@pytest.mark.parametrize("num_indices", [None, 3])
@pytest.mark.parametrize("kernel", [torch_kernel, numpy_kernel], ids=["torch", "numpy"])
def test_kernel_matches_reference(kernel, vocab, words, num_indices):
    rng = np.random.default_rng(vocab * 10 + words)
    logits, bitmask, indices = random_case(rng, 5, vocab, words, num_indices)
    expected = reference_apply(logits, bitmask, indices)
    if kernel is torch_kernel:
        t_logits = torch.from_numpy(logits.copy())
        t_idx = None if indices is None else torch.tensor(indices, dtype=torch.int64)
        kernel.apply_bitmask_inplace(t_logits, torch.from_numpy(bitmask), t_idx)
        got = t_logits.numpy()
    else:
        got = logits.copy()
        kernel.apply_bitmask_inplace(
            got, bitmask, None if indices is None else np.array(indices, dtype=np.int64)
        )
    np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.parametrize("num_indices", [None, 20])
@pytest.mark.parametrize("kernel", [torch_kernel, numpy_kernel], ids=["torch", "numpy"])
def test_kernel_chunked_rows_match_reference(kernel, num_indices):
    # 20k tokens: ~13 rows per 256 KiB chunk, so 30 rows take three chunks.
    rng = np.random.default_rng(42)
    logits, bitmask, indices = random_case(rng, 30, 20_000, 626, num_indices)
    expected = reference_apply(logits, bitmask, indices)
    if kernel is torch_kernel:
        t_logits = torch.from_numpy(logits.copy())
        t_idx = None if indices is None else torch.tensor(indices, dtype=torch.int64)
        kernel.apply_bitmask_inplace(t_logits, torch.from_numpy(bitmask), t_idx)
        got = t_logits.numpy()
    else:
        got = logits.copy()
        idx = None if indices is None else np.array(indices, dtype=np.int64)
        kernel.apply_bitmask_inplace(got, bitmask, idx)
    np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize(("vocab", "words"), SHAPES)
def test_apply_token_bitmask_inplace_torch_dtypes_match_reference(dtype, vocab, words):
    rng = np.random.default_rng(7)
    logits, bitmask, _ = random_case(rng, 4, vocab, words)
    t_logits = torch.from_numpy(logits).to(dtype)
    expected = reference_apply(t_logits.double().numpy(), bitmask, None)
    apply_token_bitmask_inplace(t_logits, torch.from_numpy(bitmask))
    assert t_logits.dtype == dtype
    np.testing.assert_array_equal(t_logits.double().numpy(), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_apply_token_bitmask_inplace_numpy_logits_with_indices(dtype):
    rng = np.random.default_rng(3)
    logits, bitmask, indices = random_case(rng, 6, 70, 3, num_indices=4)
    logits = logits.astype(dtype)
    expected = reference_apply(logits, bitmask, indices)
    apply_token_bitmask_inplace(logits, bitmask, indices)
    np.testing.assert_array_equal(logits.astype(np.float64), expected)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_apply_token_bitmask_inplace_torch_indices_list_or_tensor(as_tensor):
    rng = np.random.default_rng(5)
    logits, bitmask, indices = random_case(rng, 6, 64, 2, num_indices=3)
    expected = reference_apply(logits, bitmask, indices)
    t_logits = torch.from_numpy(logits.copy())
    idx = torch.tensor(indices) if as_tensor else indices
    apply_token_bitmask_inplace(t_logits, torch.from_numpy(bitmask), idx)
    np.testing.assert_array_equal(t_logits.numpy(), expected.astype(np.float32))


def test_apply_token_bitmask_inplace_one_dimensional():
    logits = torch.zeros(40)
    bitmask = torch.tensor([0b101, 0], dtype=torch.int32)
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.isfinite(logits).nonzero().flatten().tolist() == [0, 2]


def test_apply_token_bitmask_inplace_non_contiguous_logits_rows():
    rng = np.random.default_rng(11)
    base, bitmask, _ = random_case(rng, 4, 128, 2)
    wide = torch.from_numpy(base.copy())
    view = wide[:, :64]  # row stride 128, width 64
    expected = reference_apply(base[:, :64], bitmask, None)
    apply_token_bitmask_inplace(view, torch.from_numpy(bitmask))
    np.testing.assert_array_equal(view.numpy(), expected.astype(np.float32))
    np.testing.assert_array_equal(wide[:, 64:].numpy(), base[:, 64:])


def test_allocate_token_bitmask_allows_everything():
    bitmask = allocate_token_bitmask(3, 70)
    assert bitmask.shape == (3, 3) and bitmask.dtype == torch.int32
    assert (bitmask == -1).all()
    logits = torch.zeros(3, 70)
    apply_token_bitmask_inplace(logits, bitmask)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize(
    ("logits", "bitmask", "indices", "error", "match"),
    [
        (
            torch.zeros(2, 8, dtype=torch.int32),
            torch.zeros(2, 1, dtype=torch.int32),
            None,
            TypeError,
            "expected float32, float16, bfloat16 or float64, found torch.int32",
        ),
        (
            torch.zeros(2, 8),
            torch.zeros(2, 1, dtype=torch.int64),
            None,
            TypeError,
            "expected torch.int32, found torch.int64",
        ),
        (
            torch.zeros(2, 8),
            np.zeros((2, 1), dtype=np.int32),
            None,
            TypeError,
            "expected a torch tensor like the logits",
        ),
        (
            torch.zeros(2, 8),
            torch.zeros(3, 1, dtype=torch.int32),
            None,
            ValueError,
            "expected 2 \\(one per logits row\\), found 3",
        ),
        (
            torch.zeros(2, 8),
            torch.zeros(1, 1, dtype=torch.int32),
            [0, 1],
            ValueError,
            "expected 1 row numbers",
        ),
        (
            torch.zeros(2, 8),
            torch.zeros(1, 1, dtype=torch.int32),
            [2],
            ValueError,
            "expected values in 0..1",
        ),
        (
            torch.zeros(3, 8),
            torch.zeros(2, 1, dtype=torch.int32),
            [1, 1],
            ValueError,
            "expected distinct logits rows",
        ),
        (
            torch.zeros(2, 8),
            torch.zeros(1, dtype=torch.int32),
            None,
            ValueError,
            "found 2-D logits and 1-D bitmask",
        ),
        (
            np.zeros((2, 8), dtype=np.int32),
            np.zeros((2, 1), dtype=np.int32),
            None,
            TypeError,
            "expected float32, float16 or float64, found int32",
        ),
        (
            np.zeros((2, 8), dtype=np.float32),
            np.zeros((2, 1), dtype=np.uint32),
            None,
            TypeError,
            "expected int32, found uint32",
        ),
        (
            [[0.0]],
            np.zeros((1, 1), dtype=np.int32),
            None,
            TypeError,
            "expected a torch tensor or numpy array",
        ),
    ],
)
def test_apply_token_bitmask_inplace_bad_input_raises(logits, bitmask, indices, error, match):
    with pytest.raises(error, match=match):
        apply_token_bitmask_inplace(logits, bitmask, indices)


def test_choose_backend_cpu_float32_uses_numpy_bfloat16_uses_torch():
    assert choose_backend(np.zeros((1, 1), np.float32)) == "numpy"
    assert choose_backend(torch.zeros(1, 1)) == "numpy"
    assert choose_backend(torch.zeros(1, 1, dtype=torch.bfloat16)) == "torch"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("vocab", "words"), [*SHAPES, (128_256, 4008), (5000, 100)])
@pytest.mark.parametrize("num_indices", [None, 3])
def test_cuda_apply_matches_reference(dtype, vocab, words, num_indices):
    rng = np.random.default_rng(vocab)
    logits, bitmask, indices = random_case(rng, 6, vocab, words, num_indices)
    t_logits = torch.from_numpy(logits).to(dtype)
    expected = reference_apply(t_logits.double().numpy(), bitmask, indices)
    cuda_logits = t_logits.cuda()
    idx = None if indices is None else torch.tensor(indices, device="cuda")
    expected_backend = "triton" if triton_available() else "torch"
    assert choose_backend(cuda_logits) == expected_backend
    apply_token_bitmask_inplace(cuda_logits, torch.from_numpy(bitmask).cuda(), idx)
    np.testing.assert_array_equal(cuda_logits.double().cpu().numpy(), expected)
    # The portable kernel on the same device agrees too.
    cuda_logits2 = t_logits.cuda()
    torch_kernel.apply_bitmask_inplace(cuda_logits2, torch.from_numpy(bitmask).cuda(), idx)
    np.testing.assert_array_equal(cuda_logits2.double().cpu().numpy(), expected)
