# k0_matmul_add_maximum: matmul kernel, domain [4,8]
def kernel(in0_matmul, in1_bias, out0):
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    total = n0 * n1
    flat = cuda.grid(1)
    stride = cuda.gridsize(1)
    while flat < total:            # (a grid-stride loop; range() would divide for its trip count)
        i1 = flat % n1
        rest = flat // n1
        i0 = rest
        # %add = add %matmul, %bias : f32[4,8] loc(...)
        v_add = np.float32((in0_matmul[i0, i1] + in1_bias[i1]))
        # %maximum = maximum %add, %constant : f32[4,8] loc(...)
        v_maximum = np.float32((v_add if (v_add > np.float32(0.0) or v_add != v_add) else np.float32(0.0)))
        out0[i0, i1] = v_maximum
        flat += stride


def launch(in0_matmul, in1_bias, out0):
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    return (n0 * n1, 1)
