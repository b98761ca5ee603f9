# k0_matmul_add_maximum: matmul kernel, domain [4,8]
def kernel(in0_matmul, in1_bias, out0):
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    total = n0 * n1
    flat = cuda.grid(1)
    stride = cuda.gridsize(1)
    while flat + 3 * stride < total:     # (4 elements a trip: every load issued before the first store)
        f0 = flat
        i1_0 = f0 % n1
        rest_0 = f0 // n1
        i0_0 = rest_0
        f1 = flat + stride
        i1_1 = f1 % n1
        rest_1 = f1 // n1
        i0_1 = rest_1
        f2 = flat + 2 * stride
        i1_2 = f2 % n1
        rest_2 = f2 // n1
        i0_2 = rest_2
        f3 = flat + 3 * stride
        i1_3 = f3 % n1
        rest_3 = f3 // n1
        i0_3 = rest_3
        e1 = in0_matmul[i0_0, i1_0]
        e2 = in1_bias[i1_0]
        e3 = in0_matmul[i0_1, i1_1]
        e4 = in1_bias[i1_1]
        e5 = in0_matmul[i0_2, i1_2]
        e6 = in1_bias[i1_2]
        e7 = in0_matmul[i0_3, i1_3]
        e8 = in1_bias[i1_3]
        # %add = add %matmul, %bias : f32[4,8] loc(...)
        v0_add = np.float32((e1 + e2))
        # %add = add %matmul, %bias : f32[4,8] loc(...)
        v1_add = np.float32((e3 + e4))
        # %add = add %matmul, %bias : f32[4,8] loc(...)
        v2_add = np.float32((e5 + e6))
        # %add = add %matmul, %bias : f32[4,8] loc(...)
        v3_add = np.float32((e7 + e8))
        # %maximum = maximum %add, %constant : f32[4,8] loc(...)
        v0_maximum = np.float32((v0_add if (v0_add > np.float32(0.0) or v0_add != v0_add) else np.float32(0.0)))
        # %maximum = maximum %add, %constant : f32[4,8] loc(...)
        v1_maximum = np.float32((v1_add if (v1_add > np.float32(0.0) or v1_add != v1_add) else np.float32(0.0)))
        # %maximum = maximum %add, %constant : f32[4,8] loc(...)
        v2_maximum = np.float32((v2_add if (v2_add > np.float32(0.0) or v2_add != v2_add) else np.float32(0.0)))
        # %maximum = maximum %add, %constant : f32[4,8] loc(...)
        v3_maximum = np.float32((v3_add if (v3_add > np.float32(0.0) or v3_add != v3_add) else np.float32(0.0)))
        out0[i0_0, i1_0] = v0_maximum
        out0[i0_1, i1_1] = v1_maximum
        out0[i0_2, i1_2] = v2_maximum
        out0[i0_3, i1_3] = v3_maximum
        flat += 4 * stride
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
