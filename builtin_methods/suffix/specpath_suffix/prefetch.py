"""``prefetch(array, row)``: ask the CPU to start loading a row of a 2-D array, from numba code.

Why: a tree update looks up the children of ``depth`` independent nodes per appended token,
and the trees are far larger than the caches, so each lookup waits on memory. Issuing all of a
token's loads first lets them overlap (about 2x fewer stalls here). A prefetch never faults,
so a row index of -1 (no node) is harmless; it changes no value, only timing.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_PREFETCH = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])


@intrinsic
def prefetch(typingctx, array, row):
    """``llvm.prefetch`` (read, keep in every cache level) of ``array[row, 0]``."""
    if not (isinstance(array, types.Array) and array.ndim == 2 and isinstance(row, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.args[0])(context, builder, args[0])
        stride = builder.extract_value(view.strides, 0)
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        address = builder.add(builder.ptrtoint(view.data, stride.type), builder.mul(index, stride))
        function = builder.module.declare_intrinsic("llvm.prefetch", fnty=_PREFETCH)
        builder.call(function, [builder.inttoptr(address, _I8P), _I32(0), _I32(3), _I32(1)])
        return context.get_dummy_value()

    return types.void(array, row), codegen
