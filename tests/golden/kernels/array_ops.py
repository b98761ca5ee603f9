# k0_sub: loop kernel, domain [3,2]
def kernel(in0_slice_8, in1_slice_10, out0):
    fj.vector_width(512)
    n0 = in0_slice_8.shape[0]
    n1 = in0_slice_8.shape[1]
    for i0 in range(n0):
        known_in0_slice_8 = fj.known_last_extent(in0_slice_8, 2)
        known_in1_slice_10 = fj.known_last_extent(in1_slice_10, 2)
        known_out0 = fj.known_last_extent(out0, 2)
        for i1 in range(2):
            # %sub_12 = sub %slice_8, %slice_10 : f32[3,2] loc(...)
            v_sub_12 = np.float32((known_in0_slice_8[i0, i1] - known_in1_slice_10[i0, i1]))
            known_out0[i0, i1] = v_sub_12


def kernel_parallel(in0_slice_8, in1_slice_10, out0):
    fj.vector_width(512)
    n0 = in0_slice_8.shape[0]
    n1 = in0_slice_8.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_slice_8[low:high], in1_slice_10[low:high], out0[low:high])


# k1_sub: loop kernel, domain [3,6]
def kernel(in0_slice_9, in1_slice_11, out0):
    fj.vector_width(512)
    n0 = in0_slice_9.shape[0]
    n1 = in0_slice_9.shape[1]
    for i0 in range(n0):
        known_in0_slice_9 = fj.known_last_extent(in0_slice_9, 6)
        known_in1_slice_11 = fj.known_last_extent(in1_slice_11, 6)
        known_out0 = fj.known_last_extent(out0, 6)
        for i1 in range(6):
            # %sub_13 = sub %slice_9, %slice_11 : f32[3,6] loc(...)
            v_sub_13 = np.float32((known_in0_slice_9[i0, i1] - known_in1_slice_11[i0, i1]))
            known_out0[i0, i1] = v_sub_13


def kernel_parallel(in0_slice_9, in1_slice_11, out0):
    fj.vector_width(512)
    n0 = in0_slice_9.shape[0]
    n1 = in0_slice_9.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_slice_9[low:high], in1_slice_11[low:high], out0[low:high])


# k2_sub: loop kernel, domain [1,2]
def kernel(in0_slice_12, out0):
    fj.vector_width(512)
    n0 = 1
    n1 = in0_slice_12.shape[1]
    for i0 in range(n0):
        known_in0_slice_12 = fj.known_last_extent(in0_slice_12, 2)
        known_out0 = fj.known_last_extent(out0, 2)
        for i1 in range(2):
            # %sub_14 = sub %constant, %slice_12 : f32[1,2] loc(...)
            v_sub_14 = np.float32((np.float32(0.0) - known_in0_slice_12[0, i1]))
            known_out0[0, i1] = v_sub_14


def kernel_parallel(in0_slice_12, out0):
    fj.vector_width(512)
    n0 = 1
    n1 = in0_slice_12.shape[1]
    for i0 in prange(n0):
        fj.vector_width(512)
        known_in0_slice_12 = fj.known_last_extent(in0_slice_12, 2)
        known_out0 = fj.known_last_extent(out0, 2)
        for i1 in range(2):
            # %sub_14 = sub %constant, %slice_12 : f32[1,2] loc(...)
            v_sub_14 = np.float32((np.float32(0.0) - known_in0_slice_12[0, i1]))
            known_out0[0, i1] = v_sub_14


# k3_sub: loop kernel, domain [1,6]
def kernel(in0_slice_13, out0):
    fj.vector_width(512)
    n0 = 1
    n1 = in0_slice_13.shape[1]
    for i0 in range(n0):
        known_in0_slice_13 = fj.known_last_extent(in0_slice_13, 6)
        known_out0 = fj.known_last_extent(out0, 6)
        for i1 in range(6):
            # %sub_15 = sub %constant, %slice_13 : f32[1,6] loc(...)
            v_sub_15 = np.float32((np.float32(0.0) - known_in0_slice_13[0, i1]))
            known_out0[0, i1] = v_sub_15


def kernel_parallel(in0_slice_13, out0):
    fj.vector_width(512)
    n0 = 1
    n1 = in0_slice_13.shape[1]
    for i0 in prange(n0):
        fj.vector_width(512)
        known_in0_slice_13 = fj.known_last_extent(in0_slice_13, 6)
        known_out0 = fj.known_last_extent(out0, 6)
        for i1 in range(6):
            # %sub_15 = sub %constant, %slice_13 : f32[1,6] loc(...)
            v_sub_15 = np.float32((np.float32(0.0) - known_in0_slice_13[0, i1]))
            known_out0[0, i1] = v_sub_15


# k4_mul_where: loop kernel, domain [8,8]
def kernel(in0_reshape_4, in1_slice_5, in2_constant_11, out0):
    fj.vector_width(512)
    n0 = in0_reshape_4.shape[0]
    n1 = in1_slice_5.shape[1]
    for i0 in range(n0):
        for i1 in range(n1):
            # %mul = mul %reshape_4, %slice_5 : f32[8,8] loc(...)
            v_mul = np.float32((in0_reshape_4[i0, 0] * in1_slice_5[0, i1]))
            # %where = where %constant_11, %mul, %constant : f32[8,8] loc(...)
            v_where = (v_mul if in2_constant_11[i0, i1] else np.float32(0.0))
            out0[i0, i1] = v_where


def kernel_parallel(in0_reshape_4, in1_slice_5, in2_constant_11, out0):
    fj.vector_width(512)
    n0 = in0_reshape_4.shape[0]
    n1 = in1_slice_5.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_reshape_4[low:high], in1_slice_5, in2_constant_11[low:high], out0[low:high])


# k5_mul: loop kernel, domain [4,4]
def kernel(in0_transpose_1, out0):
    fj.vector_width(512)
    n0 = in0_transpose_1.shape[0]
    n1 = in0_transpose_1.shape[1]
    for i0 in range(n0):
        known_in0_transpose_1 = fj.known_last_extent(in0_transpose_1, 4)
        known_out0 = fj.known_last_extent(out0, 4)
        for i1 in range(4):
            # %mul_1 = mul %transpose_1, %constant_8 : f32[4,4] loc(...)
            v_mul_1 = np.float32((known_in0_transpose_1[i0, i1] * np.float32(2.0)))
            known_out0[i0, i1] = v_mul_1


def kernel_parallel(in0_transpose_1, out0):
    fj.vector_width(512)
    n0 = in0_transpose_1.shape[0]
    n1 = in0_transpose_1.shape[1]
    parts = fj.parallel_parts(n0)
    for part in prange(parts):
        fj.vector_width(512)
        low, high = fj.part_bounds(part, parts, n0)
        kernel(in0_transpose_1[low:high], out0[low:high])


# k6_matmul_add: matmul kernel, domain [4,4]
def kernel(in0_matmul, out0):
    fj.vector_width(512)
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    for i0 in range(n0):
        for i1 in range(n1):
            # %add = add %matmul, %constant_9 : f32[4,4] loc(...)
            v_add = np.float32((in0_matmul[i0, i1] + np.float32(1.0)))
            out0[i0, i1] = v_add


def kernel_parallel(in0_matmul, out0):
    fj.vector_width(512)
    n0 = in0_matmul.shape[0]
    n1 = in0_matmul.shape[1]
    for i0 in prange(n0):
        fj.vector_width(512)
        for i1 in range(n1):
            # %add = add %matmul, %constant_9 : f32[4,4] loc(...)
            v_add = np.float32((in0_matmul[i0, i1] + np.float32(1.0)))
            out0[i0, i1] = v_add
