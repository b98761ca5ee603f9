"""np.einsum as transposes, sums and batched matmuls.

Operands are contracted left to right, two at a time.  In each pair an index is a batch index
(in both and needed later), a contracted one (in both, not needed later: the matmul's K), or
free in one of them; an index that only one operand has and nothing later needs is summed
away first.  Each pair is one matmul of (batch, M, K) by (batch, K, N), reshaped and
transposed to the indices later operands and the output want.  The result has the operands'
common dtype, as numpy's einsum (int8 in, int8 out).  Repeated indices within one operand
(diagonals) and ellipses are refused with an error that says so.
"""

from __future__ import annotations

import math
import string

import numpy as np

from flowjit.errors import ShapeError, UnsupportedFunctionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def _parse(subscripts: str, count: int) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise UnsupportedFunctionError(f"np.einsum({subscripts!r}): ellipses ('...') are not supported; "
                                       f"name every axis", user_location())
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != count:
        raise ShapeError(f"np.einsum({subscripts!r}): {len(terms)} operand subscripts for {count} operands",
                         user_location())
    letters = "".join(terms) + output
    if any(letter not in string.ascii_letters for letter in letters):
        raise ShapeError(f"np.einsum({subscripts!r}): subscripts must be letters", user_location())
    if not arrow:                         # implicit: the indices seen once, in alphabetical order
        output = "".join(sorted(letter for letter in set(letters) if letters.count(letter) == 1))
    for term in terms + [output]:
        if len(set(term)) != len(term):
            raise UnsupportedFunctionError(f"np.einsum({subscripts!r}): a repeated index in {term!r} (a diagonal) "
                                           f"is not supported", user_location())
    if set(output) - set("".join(terms)):
        raise ShapeError(f"np.einsum({subscripts!r}): output index {sorted(set(output) - set(''.join(terms)))} "
                         f"appears in no operand", user_location())
    return terms, output


def _arrange(x: Tracer, term: str, wanted: str) -> Tracer:
    """``x`` (indexed by ``term``) transposed to the order of ``wanted``, a permutation of term."""
    return numpy_api.transpose(x, tuple(term.index(letter) for letter in wanted)) if term != wanted else x


def _reduce_to(x: Tracer, term: str, keep: set) -> tuple[Tracer, str]:
    """Sum away the indices of ``term`` not in ``keep``."""
    axes = tuple(i for i, letter in enumerate(term) if letter not in keep)
    if not axes:
        return x, term
    return (numpy_api.REDUCTIONS["sum"](x, axis=axes),
            "".join(letter for letter in term if letter in keep))


def _pair(a: Tracer, ta: str, b: Tracer, tb: str, needed: set) -> tuple[Tracer, str]:
    batch = [letter for letter in ta if letter in tb and letter in needed]
    contracted = [letter for letter in ta if letter in tb and letter not in needed]
    left = [letter for letter in ta if letter not in tb]
    right = [letter for letter in tb if letter not in ta]
    size = dict(zip(ta, a.shape)) | dict(zip(tb, b.shape))
    sizes = [size[letter] for letter in batch]
    m, k, n = (math.prod(size[letter] for letter in group) for group in (left, contracted, right))
    lhs = numpy_api.reshape(_arrange(a, ta, "".join(batch + left + contracted)), tuple(sizes) + (m, k))
    rhs = numpy_api.reshape(_arrange(b, tb, "".join(batch + contracted + right)), tuple(sizes) + (k, n))
    product = numpy_api.matmul(lhs, rhs)
    term = "".join(batch + left + right)
    return numpy_api.reshape(product, tuple(size[letter] for letter in term)), term


def einsum(subscripts, *operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    numpy_api._reject_kwargs("np.einsum", {"out": out, "dtype": dtype})
    if not isinstance(subscripts, str):
        raise UnsupportedFunctionError("np.einsum: only the subscripts-string form is supported", user_location())
    trace = numpy_api._trace_of(*operands)
    arrays = [numpy_api._as_tracer(trace, item if isinstance(item, Tracer) else np.asarray(item)) for item in operands]
    terms, output = _parse(subscripts, len(arrays))
    sizes: dict[str, int] = {}
    for term, array in zip(terms, arrays):
        if len(term) != array.ndim:
            raise ShapeError(f"np.einsum({subscripts!r}): {term!r} names {len(term)} axes of {array._value.type}",
                             user_location())
        for letter, dim in zip(term, array.shape):
            if sizes.setdefault(letter, dim) != dim:
                raise ShapeError(f"np.einsum({subscripts!r}): index {letter!r} has sizes {sizes[letter]} and {dim}",
                                 user_location())
    result_dtype = np.result_type(*(array.dtype for array in arrays))
    result, term = arrays[0], terms[0]
    for position in range(len(arrays)):
        later = set(output).union(*terms[position + 1:])
        if position == 0:
            result, term = _reduce_to(result, term, later)
            continue
        other, other_term = _reduce_to(arrays[position], terms[position], later | set(term))
        result, term = _pair(result, term, other, other_term, later)
    result = _arrange(result, term, output)
    return numpy_api.astype(result, result_dtype, copy=False)


FUNCTIONS = {np.einsum: einsum}
METHODS: dict = {}
