"""Torch ports of the Triton kernels sglang's paged KV path launches (``--page-size`` > 1), so
the CPU oracle runs upstream's ``PagedTokenToKVPoolAllocator`` and the paged verify unchanged
around them. Each port names the kernel it stands in for and keeps its launch signature
(``kernel[grid](...)``); the arithmetic is upstream's, position by position.

- ``mem_cache/allocator.py::alloc_extend_kernel``: upstream's own torch version,
  ``allocator.py::alloc_extend_naive``, run on the free pages padded with page 0 where fewer
  are free than needed (the Triton kernel reads past the list there; ``alloc_extend`` then sees
  ``num_new_pages > len(free_pages)`` and returns ``None``, so the padded values are never used).
- ``mem_cache/allocator.py::alloc_decode_kernel``.
- ``speculative/spec_utils.py::align_evict_mask_to_page_size`` (topk 1: keep the page of the
  last accepted token).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["install", "Launch"]


class Launch:
    """``kernel[grid](*args)`` for a torch function (the grid is ignored: the port loops)."""

    def __init__(self, fn: Callable[..., None]) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self.fn


def _alloc_extend(prefix_lens: Any, seq_lens: Any, last_loc: Any, free_pages: Any, out_indices: Any,
                  bs_upper: int, page_size: int, *max_num_extend_tokens: int) -> None:
    """``alloc_extend_kernel`` -> ``alloc_extend_naive`` (0.5.9's kernel takes one more constexpr,
    ``max_num_extend_tokens``, the block of its full-page loop: no part of the result)."""
    import torch
    from sglang.srt.mem_cache.allocator import alloc_extend_naive

    pre, seq = prefix_lens.cpu(), seq_lens.cpu()
    need = int(((seq + page_size - 1) // page_size - (pre + page_size - 1) // page_size).sum())
    if need > len(free_pages):
        free_pages = torch.cat([free_pages, free_pages.new_zeros(need - len(free_pages))])
    alloc_extend_naive(pre, seq, last_loc.cpu(), free_pages, out_indices, page_size, "cpu")


def _alloc_decode(seq_lens: Any, last_loc: Any, free_pages: Any, out_indices: Any, bs_upper: int,
                  page_size: int) -> None:
    """``alloc_decode_kernel``: a row whose ``seq_len`` opens a page takes the next free page,
    the others write after ``last_loc``."""
    k = 0
    for i in range(len(seq_lens)):
        seq = int(seq_lens[i])
        if (seq + page_size - 1) // page_size - (seq - 1 + page_size - 1) // page_size == 0:
            out_indices[i] = int(last_loc[i]) + 1
        else:
            page = int(free_pages[k]) if k < len(free_pages) else 0
            out_indices[i] = page * page_size
            k += 1


def _align_evict_mask(seq_lens: Any, evict_mask: Any, page_size: int, num_draft_tokens: int, block: int) -> None:
    """``align_evict_mask_to_page_size``: in each row, the draft positions on the page of the
    last kept token are not evicted (``evict_mask`` is ``bs * num_draft_tokens`` flat)."""
    for b in range(len(seq_lens)):
        row = evict_mask[b * num_draft_tokens:(b + 1) * num_draft_tokens]
        seq = int(seq_lens[b])
        num_false = num_draft_tokens - int(row.sum())
        start = (seq + num_false - 1) // page_size * page_size - seq
        for i in range(max(start, 0), min(start + page_size, num_draft_tokens)):
            row[i] = False


#: where upstream's paged path looks the kernels up (module globals), over the releases the
#: oracle runs: the allocator module (a package with ``paged.py`` in later releases) and the verify
_HOMES = ("sglang.srt.mem_cache.allocator", "sglang.srt.mem_cache.allocator.paged", "sglang.srt.speculative.eagle_info")


def install() -> None:
    """Put the ports where upstream's paged path looks the kernels up: each name in every home
    module that holds it (a module the release lacks is skipped)."""
    import importlib

    ports = {"alloc_extend_kernel": Launch(_alloc_extend), "alloc_decode_kernel": Launch(_alloc_decode),
             "align_evict_mask_to_page_size": Launch(_align_evict_mask)}
    for home in _HOMES:
        try:
            module = importlib.import_module(home)
        except ImportError:
            continue
        for name, port in ports.items():
            if hasattr(module, name):
                setattr(module, name, port)
