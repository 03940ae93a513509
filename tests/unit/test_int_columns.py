"""Integer columns: exact values from any integer dtype, and no items for the collector."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from fsmcompile.tables.int_columns import extend_column, int_column


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.bool_])
def test_columns_hold_the_values_of_any_integer_dtype(dtype: type) -> None:
    values = (
        np.array([0, 1, 1, 0, 1], dtype=dtype)
        if dtype is np.bool_
        else np.array([0, 1, 7, 100, 3], dtype=dtype)
    )
    column = int_column(values)
    assert list(column) == values.astype(np.int64).tolist()
    extend_column(column, np.array([-5, 2**40], dtype=np.int64))
    extend_column(column, np.array([9], dtype=np.int32))  # another width: still the numbers
    extend_column(column, [4])
    assert list(column)[-4:] == [-5, 2**40, 9, 4]


def test_the_collector_visits_none_of_a_columns_items() -> None:
    # A full pass visits what `tp_traverse` reports: every item of a list, only the type
    # of an array.
    column = int_column(np.arange(1000))
    assert gc.get_referents(column) == [type(column)]
    assert len(gc.get_referents(column.tolist())) == 1000
