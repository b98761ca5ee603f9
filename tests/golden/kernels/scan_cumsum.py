# k0_mul: loop kernel, domain [32]
def kernel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    for i0 in range(n0):
        # %mul = mul %x, %constant : f32[32] loc(...)
        v_mul = np.float32((in0_x[i0] * np.float32(2.0)))
        out0[i0] = v_mul


def kernel_parallel(in0_x, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_x[low:high], out0[low:high])


# k1_add: loop kernel, domain [32]
def kernel(in0_cumsum, out0):
    fj.vector_width(512)
    n0 = in0_cumsum.shape[0]
    for i0 in range(n0):
        # %add = add %cumsum, %constant_1 : f32[32] loc(...)
        v_add = np.float32((in0_cumsum[i0] + np.float32(1.0)))
        out0[i0] = v_add


def kernel_parallel(in0_cumsum, out0):
    fj.vector_width(512)
    n0 = in0_cumsum.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_cumsum[low:high], out0[low:high])
