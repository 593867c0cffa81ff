"""Subnormal doubles flushed to zero in this thread (x86 MXCSR FTZ and DAZ), for a diagnosis only.

    from flush_subnormals import flushed
    with flushed():
        ...  # float operations: subnormal results become 0, subnormal operands read as 0

NOT SOUND: outward rounding assumes IEEE gradual underflow (a product that underflows is within
``eta = 2^-1074`` of the exact one; flushed, the error is up to ``2^-1022``).  The benchmarks use it
only to time a float pass with and without the microcode assists that subnormal operands and
results cost on Intel cores (50-100x an ordinary multiply), never to compute a bound.  The two
MXCSR instructions are emitted through numba's LLVM intrinsics (x86-64 only).
"""

import contextlib

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: MXCSR bits: flush to zero (15) and denormals are zero (6).
FTZ_DAZ = 0x8040


@intrinsic
def _ldmxcsr(typingctx, val):
    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once_value(builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p]),
                                            "llvm.x86.sse.ldmxcsr")
        builder.call(fn, [builder.bitcast(ptr, i8p)])
        return context.get_dummy_value()

    return types.void(types.uint32), codegen


@intrinsic
def _stmxcsr(typingctx):
    def codegen(context, builder, sig, args):
        ptr = cgutils.alloca_once(builder, ir.IntType(32))
        i8p = ir.IntType(8).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p]),
                                            "llvm.x86.sse.stmxcsr")
        builder.call(fn, [builder.bitcast(ptr, i8p)])
        return builder.load(ptr)

    return types.uint32(), codegen


@numba.njit
def get_mxcsr():
    return _stmxcsr()


@numba.njit
def set_mxcsr(v):
    _ldmxcsr(numba.uint32(v))


@contextlib.contextmanager
def flushed():
    """FTZ and DAZ on in this thread inside the block, the previous MXCSR restored after it."""
    old = int(get_mxcsr())
    set_mxcsr(old | FTZ_DAZ)
    try:
        yield
    finally:
        set_mxcsr(old)
