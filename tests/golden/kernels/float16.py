# k0_mul_add: loop kernel, domain [8]
def kernel(in0_x, in1_y, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    for i0 in range(n0):
        # %mul = mul %x, %y : f16[8] loc(...)
        v_mul = fj.round_float16(np.float32((in0_x[i0] * in1_y[i0])))
        # %add = add %mul, %constant : f16[8] loc(...)
        v_add = fj.round_float16(np.float32((v_mul + np.float32(1.5))))
        out0[i0] = v_add


def kernel_parallel(in0_x, in1_y, out0):
    fj.vector_width(512)
    n0 = in0_x.shape[0]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_x[low:high], in1_y[low:high], out0[low:high])
