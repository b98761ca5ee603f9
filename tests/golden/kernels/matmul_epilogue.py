# k0_matmul_add_maximum: matmul kernel, domain [4,8]
def kernel(in0_matmul, in1_bias, out0):
    fj.vector_width(512)
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    for i0 in range(n0):
        for i1 in range(n1):
            # %add = add %matmul, %bias : f32[4,8] loc(...)
            v_add = np.float32((in0_matmul[i0, i1] + in1_bias[i1]))
            # %maximum = maximum %add, %constant : f32[4,8] loc(...)
            v_maximum = np.float32((v_add if (v_add > np.float32(0.0) or v_add != v_add) else np.float32(0.0)))
            out0[i0, i1] = v_maximum


def kernel_parallel(in0_matmul, in1_bias, out0):
    fj.vector_width(512)
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    for i0 in prange(n0):
        fj.vector_width(512)
        for i1 in range(n1):
            # %add = add %matmul, %bias : f32[4,8] loc(...)
            v_add = np.float32((in0_matmul[i0, i1] + in1_bias[i1]))
            # %maximum = maximum %add, %constant : f32[4,8] loc(...)
            v_maximum = np.float32((v_add if (v_add > np.float32(0.0) or v_add != v_add) else np.float32(0.0)))
            out0[i0, i1] = v_maximum
