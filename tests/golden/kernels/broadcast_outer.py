# k0_sub_exp: loop kernel, domain [4,8]
def kernel(in0_reshape, in1_reshape_1, out0):
    fj.vector_width(512)
    n0 = in0_reshape.shape[0]
    n1 = in1_reshape_1.shape[1]
    for i0 in range(n0):
        for i1 in range(n1):
            # %sub = sub %reshape, %reshape_1 : f32[4,8] loc(...)
            v_sub = np.float32((in0_reshape[i0, 0] - in1_reshape_1[0, i1]))
            # %exp = exp %sub : f32[4,8] loc(...)
            v_exp = np.float32(fj.exp_f32(v_sub))
            out0[i0, i1] = v_exp


def kernel_parallel(in0_reshape, in1_reshape_1, out0):
    fj.vector_width(512)
    n0 = in0_reshape.shape[0]
    n1 = in1_reshape_1.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_reshape[low:high], in1_reshape_1, out0[low:high])
